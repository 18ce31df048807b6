"""The filter width uses σ where the formula has σ²: exp(−(a − μ)² / (2σ)) with σ =
√sigma2, so the filters are too wide where σ² < 1 and too narrow where σ² > 1."""


# loses: a5_filterbank_test
# %% a5_filterbank
def filterbank(g_X, g_Y, sigma2, delta, N, A, B):
    i = torch.arange(1, N + 1, dtype=g_X.dtype)
    mu_X = g_X[:, None] + (i - N / 2 - 0.5) * delta[:, None]
    mu_Y = g_Y[:, None] + (i - N / 2 - 0.5) * delta[:, None]
    a = torch.arange(1, A + 1, dtype=g_X.dtype)
    b = torch.arange(1, B + 1, dtype=g_X.dtype)
    sigma = sigma2.sqrt()[:, None, None]
    F_X = torch.softmax(-((a - mu_X[..., None]) ** 2) / (2 * sigma), -1)
    F_Y = torch.softmax(-((b - mu_Y[..., None]) ** 2) / (2 * sigma), -1)
    return F_X, F_Y
