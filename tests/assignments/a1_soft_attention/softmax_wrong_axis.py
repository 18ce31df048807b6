"""α normalised over the images of the batch (dim 0) instead of over the L locations."""


# loses: a1_attend_test
# %% a1_attend
def attend(att, feats, h):
    e = att.w(torch.tanh(att.W_a(feats) + att.W_h(h)[:, None])).squeeze(-1)
    alpha = torch.softmax(e, dim=0)
    z = (alpha[..., None] * feats).sum(1)
    return alpha, z
