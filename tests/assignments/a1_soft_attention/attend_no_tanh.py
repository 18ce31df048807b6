"""The attention MLP leaves out its tanh: e_ti = w^T (W_a a_i + W_h h_{t−1} + b), a
linear score (α still sums to 1 and still moves with h)."""


# loses: a1_attend_test
# %% a1_attend
def attend(att, feats, h):
    e = att.w(att.W_a(feats) + att.W_h(h)[:, None]).squeeze(-1)
    alpha = e.softmax(-1)
    z = (alpha[..., None] * feats).sum(1)
    return alpha, z
