"""h_0 and c_0 from the last annotation a_L (as if it were the last hidden state of an
encoder) instead of the mean over the L locations."""


# loses: a1_init_test
# %% a1_init
def init_lstm_state(init_h, init_c, feats):
    last = feats[:, -1]
    return torch.tanh(init_h(last)), torch.tanh(init_c(last))
