"""H[s] sums over every step, padding included (log p(s|a) is masked)."""


# loses: a2_entropy_test
# %% a2_logp
def log_p_s(alpha, s, mask):
    return (alpha.gather(-1, s[..., None]).squeeze(-1).log() * mask).sum(1)


def entropy(alpha, mask):
    return -torch.xlogy(alpha, alpha).sum((1, 2))
