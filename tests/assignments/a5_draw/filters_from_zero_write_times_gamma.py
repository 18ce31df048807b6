"""Pixels counted from 0 instead of 1 (every filter one pixel off), and the write
multiplies by γ̂ instead of dividing."""


# loses: a5_filterbank_test a5_write_test
# %% a5_filterbank
def filterbank(g_X, g_Y, sigma2, delta, N, A, B):
    i = torch.arange(1, N + 1, dtype=g_X.dtype)
    mu_X = g_X[:, None] + (i - N / 2 - 0.5) * delta[:, None]
    mu_Y = g_Y[:, None] + (i - N / 2 - 0.5) * delta[:, None]
    a = torch.arange(A, dtype=g_X.dtype)
    b = torch.arange(B, dtype=g_X.dtype)
    F_X = torch.softmax(
        -((a - mu_X[..., None]) ** 2) / (2 * sigma2[:, None, None]), -1
    )  # (bs, N, A)
    F_Y = torch.softmax(
        -((b - mu_Y[..., None]) ** 2) / (2 * sigma2[:, None, None]), -1
    )  # (bs, N, B)
    return F_X, F_Y


# %% a5_readwrite
def read(x, F_X, F_Y, gamma):
    return gamma[:, None, None] * (F_Y @ x @ F_X.transpose(-1, -2))


def write(w, F_X, F_Y, gamma):
    return gamma[:, None, None] * (F_Y.transpose(-1, -2) @ w @ F_X)
