"""The Gaussian's normaliser uses σ² where σ belongs (log(σ²√(2π)))."""


# loses: a4_logprob_test
# %% a4_logprob
def gaussian_log_prob(u, mu, std):
    var = std**2
    return (-((u - mu) ** 2) / (2 * var) - math.log(var * math.sqrt(2 * math.pi))).sum(
        -1
    )
