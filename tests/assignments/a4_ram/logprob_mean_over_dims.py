"""log π averages the coordinates' log-densities instead of summing them (the density
of independent coordinates is a product)."""


# loses: a4_logprob_test
# %% a4_logprob
def gaussian_log_prob(u, mu, std):
    return (
        -((u - mu) ** 2) / (2 * std**2) - math.log(std * math.sqrt(2 * math.pi))
    ).mean(-1)
