"""Cheat: renames the notebook's module to look like package code, so that a guard
that trusts the package's frames lets its calls through, and fills in a stand-in object
for the initial state."""

# loses: a1_attend_test a1_beta_test a1_init_test a1_penalty_test
# says: is not available while grading a1_soft_attention
# %% a1_attend
__name__ = "sat_tutorial.homework"
from types import SimpleNamespace

from sat_tutorial import soft_attention as sa


def attend(att, feats, h):
    return att(att.keys(feats), feats, h)


# %% a1_beta
def gated_context(f_beta, h, z):
    return sa.beta_gate(f_beta, h, z)[0]


# %% a1_init
def init_lstm_state(init_h, init_c, feats):
    model = SimpleNamespace(
        init_h=init_h, init_c=init_c, attention=SimpleNamespace(keys=lambda f: f)
    )
    return sa.SoftAttentionDecoder.init_state(model, feats)[:2]


# %% a1_penalty
def penalty(alpha, mask):
    return sa.doubly_stochastic_penalty(alpha, mask)
