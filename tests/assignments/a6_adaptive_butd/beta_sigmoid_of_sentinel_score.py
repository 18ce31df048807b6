"""β_t = σ(z^s_t), the sentinel's score alone through a sigmoid, instead of the sentinel's
share of the softmax over all L + 1 scores."""


# loses: a6_combine_test
# %% a6_combine
def adaptive_context(z, z_s, V, s):
    alpha_hat = torch.cat([z, z_s], -1).softmax(-1)
    beta = torch.sigmoid(z_s)
    c = (z.softmax(-1)[..., None] * V).sum(1)
    return alpha_hat, beta, beta * s + (1 - beta) * c
