"""L^z averages the KL over the T steps instead of summing it (and its constant is per
step, −Z/2)."""


# loses: a5_kl_test
# %% a5_kl
def latent_loss(mu, log_sigma):
    T, bs, Z = mu.shape
    return 0.5 * (mu**2 + (2 * log_sigma).exp() - 2 * log_sigma).sum(2).mean(0) - Z / 2
