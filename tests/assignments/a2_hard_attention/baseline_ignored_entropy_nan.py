"""The baseline is never subtracted (unbiased, but the variance stays that of b = 0),
the entropy computes α log α directly (NaN where α = 0), and the moving average forgets
its first value."""


# loses: a2_surrogate_test a2_enumeration_test a2_entropy_test a2_baseline_test
# %% a2_logp
def log_p_s(alpha, s, mask):
    return (alpha.gather(-1, s[..., None]).squeeze(-1).log() * mask).sum(1)


def entropy(alpha, mask):
    return (-(alpha * alpha.log()).sum(-1) * mask).sum(1)


# %% a2_baseline
def update_baseline(b_prev, k, reward, decay=0.9):
    return decay * b_prev + (1 - decay) * float(reward)


# %% a2_surrogate
def surrogate(log_py, log_ps, H, b, lambda_r=1.0, lambda_e=0.0):
    return log_py + lambda_r * log_py.detach() * log_ps + lambda_e * H
