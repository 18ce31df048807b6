"""The doubly stochastic penalty sums α over every step, padding included, and β is
applied without its sigmoid."""


# loses: a1_penalty_test a1_beta_test
# %% a1_beta
def gated_context(f_beta, h, z):
    return f_beta(h) * z


# %% a1_penalty
def penalty(alpha, mask):
    return ((1 - alpha.sum(1)) ** 2).sum(-1)
