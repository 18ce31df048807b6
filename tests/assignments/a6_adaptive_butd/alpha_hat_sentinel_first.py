"""α̂_t puts the sentinel first ([z^s_t; z_t]) where the task asks for it last; β_t is
read from the right place, so only the order of α̂_t is wrong."""


# loses: a6_combine_test
# %% a6_combine
def adaptive_context(z, z_s, V, s):
    alpha_hat = torch.cat([z_s, z], -1).softmax(-1)
    beta = alpha_hat[:, :1]
    c = (z.softmax(-1)[..., None] * V).sum(1)
    return alpha_hat, beta, beta * s + (1 - beta) * c
