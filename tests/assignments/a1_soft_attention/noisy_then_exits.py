"""Correct code that writes to stderr (a warning and a debug print in every function),
and whose last solution cell ends the process (os._exit): only that part is lost."""

# loses: a1_penalty_test
# %% a1_attend
import sys
import warnings

warnings.warn("a warning when the cell runs")


def attend(att, feats, h):
    print("debug: attend", feats.shape, file=sys.stderr)
    warnings.warn("a warning from attend")
    e = att.w(torch.tanh(att.W_a(feats) + att.W_h(h)[:, None])).squeeze(-1)
    alpha = e.softmax(-1)
    return alpha, (alpha[..., None] * feats).sum(1)


# %% a1_beta
def gated_context(f_beta, h, z):
    print("debug: beta", file=sys.stderr)
    return torch.sigmoid(f_beta(h)) * z


# %% a1_penalty
import os


def penalty(alpha, mask):
    return ((1 - (alpha * mask[..., None]).sum(1)) ** 2).sum(-1)


os._exit(0)
