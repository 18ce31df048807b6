"""The sentinel's gate and squashing swapped: s_t = tanh(W_x x + W_h h) ⊙ σ(m_t)."""


# loses: a6_sentinel_test
# %% a6_sentinel
def sentinel(sent, x, h_prev, m):
    return torch.tanh(sent.W_x(x) + sent.W_h(h_prev)) * torch.sigmoid(m)
