"""Cheat: beam search through decoding.decode, which calls the package's beam search
from package code (a guard that trusts package frames lets it through), and
expand_state through its unwrapped guard."""

# loses: a3_expand_test a3_greedy_test a3_brute_force_test a3_package_test
# says: is not available while grading a3_decoding
# %% a3_expand
import inspect

from sat_tutorial import decoding


def expand_state(state, k, static=()):
    return inspect.unwrap(decoding.expand_state)(state, k, static)


# %% a3_beam
def beam_search(model, feats, beam_size=3, max_len=20):
    found = decoding.decode(model, feats, beam_size=beam_size, max_len=max_len)
    return [(c.tokens, c.logprob) for c in found]
