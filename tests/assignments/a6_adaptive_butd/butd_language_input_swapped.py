"""The language LSTM's input is [h¹_t; v̂_t] instead of [v̂_t; h¹_t] (same size here,
so nothing fails: the weights just read the wrong halves); from the second step the
attention LSTM reads the wrong h²_{t−1} too."""


# loses: a6_butd_attention_test a6_butd_words_test
# %% a6_butd
def butd_step(model, words, state):
    h1, c1, h2, c2, v, gates_v, keys = state
    x1 = torch.cat([h2, v.mean(1), model.embed(words)], 1)
    h1, c1 = model.att_lstm(x1, (h1, c1))
    alpha, v_hat = model.attention(model.attention.keys(v), v, h1)
    h2, c2 = model.lang_lstm(torch.cat([h1, v_hat], 1), (h2, c2))
    return model.W_p(h2).log_softmax(-1), (h1, c1, h2, c2, v, gates_v, keys), alpha
