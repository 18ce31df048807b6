"""ẑ_t weights the annotations by the raw scores e_ti instead of the softmax α_ti."""


# loses: a1_attend_test
# %% a1_attend
def attend(att, feats, h):
    e = att.w(torch.tanh(att.W_a(feats) + att.W_h(h)[:, None])).squeeze(-1)
    alpha = e.softmax(-1)
    z = (e[..., None] * feats).sum(1)
    return alpha, z
