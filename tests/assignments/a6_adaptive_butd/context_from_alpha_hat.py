"""c_t weights the regions by the first L entries of α̂_t (which sum to 1 − β_t) instead
of by α_t = softmax(z_t)."""


# loses: a6_combine_test
# %% a6_combine
def adaptive_context(z, z_s, V, s):
    alpha_hat = torch.cat([z, z_s], -1).softmax(-1)
    beta = alpha_hat[:, -1:]
    c = (alpha_hat[:, :-1, None] * V).sum(1)
    return alpha_hat, beta, beta * s + (1 - beta) * c
