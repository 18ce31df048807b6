"""An attention loop that never ends: the per-cell timeout must stop it, and only that
part scores 0."""


# loses: a1_attend_test
# %% a1_attend
def attend(att, feats, h):
    alpha = None
    while alpha is None:
        e = att.w(torch.tanh(att.W_a(feats) + att.W_h(h)[:, None])).squeeze(-1)
    return alpha, (alpha[..., None] * feats).sum(1)
