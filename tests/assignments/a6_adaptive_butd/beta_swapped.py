"""β_t weights the image context instead of the sentinel: ĉ_t = β_t c_t + (1 − β_t)
s_t."""


# loses: a6_combine_test
# %% a6_combine
def adaptive_context(z, z_s, V, s):
    alpha_hat = torch.cat([z, z_s], -1).softmax(-1)
    beta = alpha_hat[:, -1:]
    c = (z.softmax(-1)[..., None] * V).sum(1)
    return alpha_hat, beta, beta * c + (1 - beta) * s
