"""Cheat: expand_state and beam_search call sat_tutorial.decoding's own."""

# loses: a3_expand_test a3_greedy_test a3_brute_force_test a3_package_test
# says: ForbiddenCall
# %% a3_expand
import sat_tutorial.decoding as dec


def expand_state(state, k, static=()):
    return dec.expand_state(state, k, static)


# %% a3_beam
def beam_search(model, feats, beam_size=3, max_len=20):
    return [
        (c.tokens, c.logprob)
        for c in dec.beam_search(model, feats, beam_size=beam_size, max_len=max_len)
    ]
