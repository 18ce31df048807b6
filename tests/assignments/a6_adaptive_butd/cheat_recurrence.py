"""Cheat: one BUTD step from the captioner's own _recurrence and _word_gates, and the
sentinel and adaptive context through unwrapped guards."""

# loses: a6_sentinel_test a6_combine_test a6_butd_attention_test a6_butd_words_test
# says: is not available while grading a6_adaptive_butd
# %% a6_sentinel
import inspect

from sat_tutorial.adaptive_attention import AdaptiveAttention


def sentinel(sent, x, h_prev, m):
    return inspect.unwrap(VisualSentinel.forward)(sent, sent.W_x(x), h_prev, m)


# %% a6_combine
def adaptive_context(z, z_s, V, s):
    alpha_hat, _, c_hat = inspect.unwrap(AdaptiveAttention.combine)(z, z_s, V, s)
    return alpha_hat, alpha_hat[:, -1:], c_hat


# %% a6_butd
def butd_step(model, words, state):
    gates = model._word_gates(model.embed(words))
    state, alpha = BUTDCaptioner._recurrence(model, gates, state)
    return model.W_p(state[2]).log_softmax(-1), state, alpha
