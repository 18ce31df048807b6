"""The score leaves out W_h h_{t−1}: α is the same at every step of a caption."""


# loses: a1_attend_test
# %% a1_attend
def attend(att, feats, h):
    e = att.w(torch.tanh(att.W_a(feats))).squeeze(-1)
    alpha = e.softmax(-1)
    return alpha, (alpha[..., None] * feats).sum(1)
