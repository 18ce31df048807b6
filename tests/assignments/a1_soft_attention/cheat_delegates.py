"""Cheat: attend and penalty call the package's own implementations."""


# loses: a1_attend_test a1_penalty_test
# says: ForbiddenCall
# %% a1_attend
def attend(att, feats, h):
    return att(att.keys(feats), feats, h)


# %% a1_penalty
from sat_tutorial.soft_attention import doubly_stochastic_penalty


def penalty(alpha, mask):
    return doubly_stochastic_penalty(alpha, mask)
