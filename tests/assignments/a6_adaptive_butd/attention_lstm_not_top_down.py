"""The attention LSTM is fed its own previous output h¹_{t−1} instead of the language
LSTM's h²_{t−1} (so nothing flows top-down from the language model), and the sentinel
leaves out the tanh of the memory cell."""


# loses: a6_sentinel_test a6_butd_attention_test a6_butd_words_test
# %% a6_sentinel
def sentinel(sent, x, h_prev, m):
    return torch.sigmoid(sent.W_x(x) + sent.W_h(h_prev)) * m


# %% a6_butd
def butd_step(model, words, state):
    h1, c1, h2, c2, v, gates_v, keys = state
    x1 = torch.cat([h1, v.mean(1), model.embed(words)], 1)
    h1, c1 = model.att_lstm(x1, (h1, c1))
    alpha, v_hat = model.attention(model.attention.keys(v), v, h1)
    h2, c2 = model.lang_lstm(torch.cat([v_hat, h1], 1), (h2, c2))
    return model.W_p(h2).log_softmax(-1), (h1, c1, h2, c2, v, gates_v, keys), alpha
