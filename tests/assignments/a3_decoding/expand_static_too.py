"""expand_state repeats every tensor of the state, the per-image constants at the
`static` positions too."""


# loses: a3_expand_test
# %% a3_expand
def expand_state(state, k, static=()):
    return tuple(s.repeat_interleave(k, 0) for s in state)
