"""log p(s|a) sums over every step, padding included."""


# loses: a2_logp_test
# %% a2_logp
def log_p_s(alpha, s, mask):
    return alpha.gather(-1, s[..., None]).squeeze(-1).log().sum(1)


def entropy(alpha, mask):
    return (-torch.xlogy(alpha, alpha).sum(-1) * mask).sum(1)
