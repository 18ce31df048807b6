"""An off-by-one in time: the attention is computed from h¹_{t−1}, the attention LSTM's
state before this step, instead of the new h¹_t."""


# loses: a6_butd_attention_test a6_butd_words_test
# %% a6_butd
def butd_step(model, words, state):
    h1, c1, h2, c2, v, gates_v, keys = state
    x1 = torch.cat([h2, v.mean(1), model.embed(words)], 1)
    alpha, v_hat = model.attention(model.attention.keys(v), v, h1)
    h1, c1 = model.att_lstm(x1, (h1, c1))
    h2, c2 = model.lang_lstm(torch.cat([v_hat, h1], 1), (h2, c2))
    return model.W_p(h2).log_softmax(-1), (h1, c1, h2, c2, v, gates_v, keys), alpha
