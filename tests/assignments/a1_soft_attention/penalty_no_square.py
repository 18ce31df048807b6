"""The doubly stochastic penalty without its square: Σ_i (1 − Σ_t α_ti), which is
negative whenever a location gets more than its share."""


# loses: a1_penalty_test
# %% a1_penalty
def penalty(alpha, mask):
    return (1 - (alpha * mask[..., None]).sum(1)).sum(-1)
