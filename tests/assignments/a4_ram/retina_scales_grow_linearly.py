"""Patch j has side g·(j + 1) instead of g·2^j, averaged in (j + 1) × (j + 1) blocks:
the scales grow linearly, not by doubling."""


# loses: a4_retina_scales_test
# %% a4_retina
def retina(x, l, g=8, k=1):
    B, _, H, W = x.shape
    out = x.new_zeros(B, k, g, g)
    for j in range(k):
        f = j + 1
        s = g * f
        corners = glimpse_corners(l, H, W, s)
        padded = F.pad(x[:, 0], (s, s, s, s))
        for b in range(B):
            x0, y0 = corners[b].tolist()
            patch = padded[b, y0 + s : y0 + 2 * s, x0 + s : x0 + 2 * s]
            out[b, j] = patch.reshape(g, f, g, f).mean((1, 3))
    return out
