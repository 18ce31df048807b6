"""The paper's constant −T/2 (one per step) instead of −TZ/2 (one per latent coordinate
and step): L^z is then not 0 when Q equals the prior, and is off by T(Z − 1)/2 nats
everywhere."""


# loses: a5_kl_test
# %% a5_kl
def latent_loss(mu, log_sigma):
    T = mu.shape[0]
    return 0.5 * (mu**2 + (2 * log_sigma).exp() - 2 * log_sigma).sum((0, 2)) - T / 2
