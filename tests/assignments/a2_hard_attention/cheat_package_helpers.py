"""Cheat: public helpers of the package that are not the functions the parts name:
sample_locations, location_log_probs, update_baseline on a stand-in object, and the
entropy through an unwrapped guard."""

# loses: a2_sample_test a2_logp_test a2_entropy_test a2_baseline_test
# says: is not available while grading a2_hard_attention
# %% a2_sample
from sat_tutorial import hard_attention as ha


def sample_locations(alpha):
    return ha.sample_locations(alpha)


# %% a2_logp
import inspect


def log_p_s(alpha, s, mask):
    return ha.location_log_probs(alpha, s, mask).sum(1)


def entropy(alpha, mask):
    return inspect.unwrap(ha.attention_entropy)(alpha, mask)


# %% a2_baseline
from types import SimpleNamespace


def update_baseline(b_prev, k, reward, decay=0.9):
    model = SimpleNamespace(
        baseline=torch.tensor(float(b_prev)),
        baseline_steps=torch.tensor(k - 1),
        baseline_decay=decay,
    )
    inspect.unwrap(ha.HardAttentionCaptioner.update_baseline)(model, reward)
    return float(model.baseline)
