"""The log-variance term enters with a plus sign: ½(μ² + σ² + log σ²) − TZ/2."""


# loses: a5_kl_test
# %% a5_kl
def latent_loss(mu, log_sigma):
    T, bs, Z = mu.shape
    return 0.5 * (mu**2 + (2 * log_sigma).exp() + 2 * log_sigma).sum((0, 2)) - T * Z / 2
