"""The grid offset has the wrong sign on its half: μ^i = g + (i − N/2 + 0.5) δ, so the
grid sits one stride to the right of (below) its centre g."""


# loses: a5_filterbank_test
# %% a5_filterbank
def filterbank(g_X, g_Y, sigma2, delta, N, A, B):
    i = torch.arange(1, N + 1, dtype=g_X.dtype)
    mu_X = g_X[:, None] + (i - N / 2 + 0.5) * delta[:, None]
    mu_Y = g_Y[:, None] + (i - N / 2 + 0.5) * delta[:, None]
    a = torch.arange(1, A + 1, dtype=g_X.dtype)
    b = torch.arange(1, B + 1, dtype=g_X.dtype)
    F_X = torch.softmax(-((a - mu_X[..., None]) ** 2) / (2 * sigma2[:, None, None]), -1)
    F_Y = torch.softmax(-((b - mu_Y[..., None]) ** 2) / (2 * sigma2[:, None, None]), -1)
    return F_X, F_Y
