"""The variance is taken as exp(log σ) = σ, not σ² = exp(2 log σ), in both the σ² term
and the log σ² term (right only when σ = 1)."""


# loses: a5_kl_test
# %% a5_kl
def latent_loss(mu, log_sigma):
    T, bs, Z = mu.shape
    return 0.5 * (mu**2 + log_sigma.exp() - log_sigma).sum((0, 2)) - T * Z / 2
