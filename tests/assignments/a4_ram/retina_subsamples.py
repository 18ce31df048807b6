"""The larger patches are subsampled (every 2^j-th pixel) instead of averaged over
2^j × 2^j blocks."""


# loses: a4_retina_scales_test
# %% a4_retina
def retina(x, l, g=8, k=1):
    B, _, H, W = x.shape
    out = x.new_zeros(B, k, g, g)
    for j in range(k):
        f = 2**j
        s = g * f
        corners = glimpse_corners(l, H, W, s)
        padded = F.pad(x[:, 0], (s, s, s, s))
        for b in range(B):
            x0, y0 = corners[b].tolist()
            patch = padded[b, y0 + s : y0 + 2 * s, x0 + s : x0 + 2 * s]
            out[b, j] = patch[::f, ::f]
    return out
