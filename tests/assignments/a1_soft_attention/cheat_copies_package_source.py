"""Cheat: copies the package's source while the notebook runs (the file under /pkg,
and inspect.getsource) and executes it as its own module."""

# loses: a1_attend_test a1_beta_test a1_penalty_test
# says: is not available while grading a1_soft_attention
# %% a1_attend
import inspect
import pathlib
import types

import sat_tutorial.soft_attention as sa

COPY = types.ModuleType("sat_tutorial.my_copy")
COPY.__package__ = "sat_tutorial"
exec(pathlib.Path(sa.__file__).read_text(), COPY.__dict__)


def attend(att, feats, h):
    forward = COPY.SoftAttention.forward
    return forward(att, att.keys(feats), feats, h)


# %% a1_beta
def gated_context(f_beta, h, z):
    return COPY.beta_gate(f_beta, h, z)[0]


# %% a1_penalty
NS = {"torch": __import__("torch")}
exec(inspect.getsource(sa.doubly_stochastic_penalty).replace("-> torch.Tensor", ""), NS)


def penalty(alpha, mask):
    return NS["doubly_stochastic_penalty"](alpha, mask)
