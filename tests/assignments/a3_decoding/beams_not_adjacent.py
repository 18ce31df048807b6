"""`repeat` instead of `repeat_interleave`: the rows of an image's beams are not next to
each other, so beams read another image's state (and per-image constants) as soon as a
batch holds more than one image."""


# loses: a3_expand_test a3_package_test
# %% a3_expand
def expand_state(state, k, static=()):
    return tuple(
        s if i in static else s.repeat(k, *[1] * (s.dim() - 1))
        for i, s in enumerate(state)
    )
