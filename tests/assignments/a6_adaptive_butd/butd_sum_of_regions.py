"""The attention LSTM reads the sum of the region features instead of their mean v̄."""


# loses: a6_butd_attention_test a6_butd_words_test
# %% a6_butd
def butd_step(model, words, state):
    h1, c1, h2, c2, v, gates_v, keys = state
    x1 = torch.cat([h2, v.sum(1), model.embed(words)], 1)
    h1, c1 = model.att_lstm(x1, (h1, c1))
    alpha, v_hat = model.attention(model.attention.keys(v), v, h1)
    h2, c2 = model.lang_lstm(torch.cat([v_hat, h1], 1), (h2, c2))
    return model.W_p(h2).log_softmax(-1), (h1, c1, h2, c2, v, gates_v, keys), alpha
