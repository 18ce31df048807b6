"""The sentinel gate leaves out the previous hidden state: g_t = σ(W_x x_t)."""


# loses: a6_sentinel_test
# %% a6_sentinel
def sentinel(sent, x, h_prev, m):
    g = torch.sigmoid(sent.W_x(x))
    return g * torch.tanh(m)
