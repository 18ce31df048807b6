"""The corner from glimpse_corners is read as (y, x): the patch is cut at the mirrored
place (invisible when x = y, as at the centre of a square image)."""


# loses: a4_retina_test a4_retina_scales_test
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
            y0, x0 = corners[b].tolist()
            patch = padded[b, y0 + s : y0 + 2 * s, x0 + s : x0 + 2 * s]
            out[b, j] = patch.reshape(g, f, g, f).mean((1, 3))
    return out
