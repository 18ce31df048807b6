"""The sampler takes the most likely location instead of drawing one."""


# loses: a2_sample_test
# %% a2_sample
def sample_locations(alpha):
    return alpha.argmax(-1)
