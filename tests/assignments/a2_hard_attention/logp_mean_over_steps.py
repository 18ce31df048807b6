"""log p(s|a) averages log α_{t,s_t} over the real-word steps instead of summing them
(the log of a product is a sum)."""


# loses: a2_logp_test
# %% a2_logp
def log_p_s(alpha, s, mask):
    return (alpha.gather(-1, s[..., None]).squeeze(-1).log() * mask).sum(1) / mask.sum(
        1
    )


def entropy(alpha, mask):
    return (-torch.xlogy(alpha, alpha).sum(-1) * mask).sum(1)
