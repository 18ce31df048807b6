"""Cheat: unwraps the guards around the package's implementations (the guard is built
with functools.wraps, so `inspect.unwrap` returns what it wraps)."""

# loses: a1_attend_test a1_beta_test a1_penalty_test
# says: is not available while grading a1_soft_attention
# %% a1_attend
import inspect

from sat_tutorial.soft_attention import SoftAttention


def attend(att, feats, h):
    forward = inspect.unwrap(SoftAttention.forward)
    return forward(att, att.keys(feats), feats, h)


# %% a1_beta
import inspect

from sat_tutorial import soft_attention


def gated_context(f_beta, h, z):
    return inspect.unwrap(soft_attention.beta_gate)(f_beta, h, z)[0]


# %% a1_penalty
import inspect

from sat_tutorial.soft_attention import doubly_stochastic_penalty


def penalty(alpha, mask):
    return inspect.unwrap(doubly_stochastic_penalty)(alpha, mask)
