"""REINFORCE with the raw reward (the baseline is trained but never subtracted), and the
Gaussian log-density without its normalising constant −D log(σ√(2π)); the retina crops
at the image border instead of padding with zeros."""


# loses: a4_logprob_test a4_loss_value_test a4_loss_grad_test a4_retina_scales_test
# %% a4_retina
def retina(x, l, g=8, k=1):
    B, _, H, W = x.shape
    out = x.new_zeros(B, k, g, g)
    for j in range(k):
        f = 2**j
        s = g * f
        corners = glimpse_corners(l, H, W, s)
        for b in range(B):
            x0, y0 = corners[b].tolist()
            x0, y0 = (
                min(max(x0, 0), W - s),
                min(max(y0, 0), H - s),
            )  # moved inside the image
            out[b, j] = (
                x[b, 0, y0 : y0 + s, x0 : x0 + s].reshape(g, f, g, f).mean((1, 3))
            )
    return out


# %% a4_logprob
def gaussian_log_prob(u, mu, std):
    return (-((u - mu) ** 2) / (2 * std**2)).sum(-1)


# %% a4_loss
def hybrid_loss(out, y):
    R = (out.logits.argmax(-1) == y).float()
    action = F.cross_entropy(out.logits, y)
    reinforce = -(out.log_pi * R[:, None]).sum(1).mean()
    baseline = F.mse_loss(out.baseline, R[:, None].expand_as(out.baseline))
    return action + reinforce + baseline
