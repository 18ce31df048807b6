"""Cheat: redefines check_close (in the notebook and in the package) so that every test
passes, with functions that compute nothing."""

# loses: a1_attend_test a1_beta_test a1_init_test a1_penalty_test
# %% a1_attend
import sat_tutorial.core


def check_close(*args, **kwargs):
    return None


sat_tutorial.core.check_close = check_close


def attend(att, feats, h):
    B, L, _ = feats.shape
    return torch.full((B, L), 1.0 / L), feats.mean(1)


# %% a1_beta
def gated_context(f_beta, h, z):
    return z


# %% a1_init
def init_lstm_state(init_h, init_c, feats):
    zeros = torch.zeros(feats.shape[0], init_h.out_features)
    return zeros, zeros


# %% a1_penalty
def penalty(alpha, mask):
    return torch.zeros(alpha.shape[0])
