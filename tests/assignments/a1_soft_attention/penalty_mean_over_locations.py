"""The penalty averages over the L locations instead of summing over them."""


# loses: a1_penalty_test
# %% a1_penalty
def penalty(alpha, mask):
    return ((1 - (alpha * mask[..., None]).sum(1)) ** 2).mean(-1)
