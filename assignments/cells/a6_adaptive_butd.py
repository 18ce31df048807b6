# %% md
# # A6 — Knowing when to look, and attending top-down (Lu et al. 2017; Anderson et al.
# 2018)
#
# Follows notebooks `10_adaptive_attention` and `11_butd`. Adaptive attention adds a
# **visual sentinel** $s_t$, a memory of what the language model already knows, and a
# gate $\beta_t$ that decides per word how much to take from the image and how much from
# the sentinel. Bottom-up/top-down attention (BUTD) runs two LSTMs per word: a top-down
# attention LSTM that decides where to look over region features, and a language LSTM
# that predicts the word. You write the sentinel, $\beta_t$ and $\hat c_t$, and one
# decoding step of BUTD; the modules with their weights come from the package. The
# grader's checks compare with `VisualSentinel`, `AdaptiveAttention.combine` and
# `BUTDCaptioner.step`.
#
# **What you may use.** torch and the modules you are handed (`sent.W_x`, `sent.W_h`,
# `model.embed`, the LSTM cells, `model.attention`, `model.W_p`). Write each answer
# yourself: copying code from the package (its source, its notebooks) or from anyone
# else into an answer is not allowed, whether pasted or read and executed while the
# notebook runs. While your notebook is graded, the package's implementations of what
# the parts ask for are not there: those functions raise `NotImplementedError`
# (`VisualSentinel.forward`, `AdaptiveAttention.combine`, and `BUTDCaptioner.step` and
# `._recurrence` among them); a part that relies on them scores 0. The grader runs your
# functions on its own inputs in a separate process and compares the results with the
# solution's; the tests below only help you.
#
# Write your code between `# YOUR CODE HERE` / `raise NotImplementedError()` (delete
# both). 10 points.

# %%
import torch
from sat_tutorial.core import check_close, seed_everything
from sat_tutorial.adaptive_attention import VisualSentinel
from sat_tutorial.butd_beyond import BUTDCaptioner

torch.set_num_threads(1)

seed_everything(0)
B, L, d, E = 3, 5, 6, 4  # images, regions, hidden size, word embedding size

# %% md
# ## 1. The visual sentinel (2 points)
#
# $$g_t = \sigma(W_x x_t + W_h h_{t-1}), \qquad s_t = g_t \odot \tanh(m_t),$$
#
# with $x_t$ the LSTM's input, $h_{t-1}$ its previous hidden state and $m_t$ its new
# memory cell. `sentinel.W_x` (with bias) and `sentinel.W_h` (no bias) are `nn.Linear`s;
# `x (B, E + d)`, `h_prev (B, d)`, `m (B, d)`.


# %% solution id=a6_sentinel
def sentinel(sent, x, h_prev, m):
    "s_t `(B, d)`."
    ### BEGIN SOLUTION
    g = torch.sigmoid(sent.W_x(x) + sent.W_h(h_prev))
    return g * torch.tanh(m)
    ### END SOLUTION


# %% test id=a6_sentinel_test points=2
sent = VisualSentinel(E + d, d)
s_t = sentinel(sent, torch.randn(B, E + d), torch.randn(B, d), torch.randn(B, d))
assert s_t.shape == (B, d), "s_t must be (B, d)"
assert (s_t.abs() < 1).all(), "|s_t| < 1: a gate in (0, 1) times a tanh"
x_in, h_in, m_in = torch.randn(B, E + d), torch.randn(B, d), torch.randn(B, d)
assert not torch.allclose(
    sentinel(sent, x_in, h_in, m_in), sentinel(sent, x_in, h_in + 1.0, m_in)
), "s_t does not change with h_{t−1}: the gate is σ(W_x x_t + W_h h_{t−1})"
with torch.no_grad():
    sent.W_x.weight.zero_()
    sent.W_x.bias.zero_()
    sent.W_h.weight.zero_()
m_big = torch.full((B, d), 10.0)
check_close(
    sentinel(sent, torch.randn(B, E + d), torch.randn(B, d), m_big),
    torch.full((B, d), 0.5 * float(torch.tanh(torch.tensor(10.0)))),
    "s_t with a zero gate input (g = σ(0) = 1/2) and m_t = 10: ½ tanh(10) (the tanh "
    "is of the memory m_t, the sigmoid of W_x x + W_h h)",
)


# %% check id=a6_sentinel_test
def calls():
    from sat_tutorial.adaptive_attention import VisualSentinel

    seed_everything(61)
    sent = VisualSentinel(9, 7)
    x, h, m = torch.randn(4, 9), torch.randn(4, 7), 3 * torch.randn(4, 7)
    return [
        build(VisualSentinel, (9, 7), state=sent.state_dict()),
        call("sentinel", ref(0), x, h, m),
    ]


def outputs(results):
    return {"s_t": results[1]}


# %% md
# ## 2. The sentinel gate $\beta_t$ and the adaptive context $\hat c_t$ (3 points)
#
# The region scores are $z_t \in \mathbb R^L$ and the sentinel's score is one more
# number $z^s_t$. Softmax over the $L + 1$ scores together:
#
# $$\hat\alpha_t = \mathrm{softmax}([z_t; z^s_t]), \qquad
#   \beta_t = \hat\alpha_t[L + 1], \qquad
#   c_t = \sum_i \alpha_{ti} v_i \text{ with } \alpha_t = \mathrm{softmax}(z_t), \qquad
#   \hat c_t = \beta_t s_t + (1 - \beta_t) c_t .$$
#
# `z (B, L)`, `z_s (B, 1)`, region features `V (B, L, d)`, sentinel `s (B, d)`. Return
# `alpha_hat (B, L + 1)` (the sentinel last), `beta (B, 1)` and `c_hat (B, d)`.


# %% solution id=a6_combine
def adaptive_context(z, z_s, V, s):
    "α̂_t `(B, L+1)`, β_t `(B, 1)`, ĉ_t `(B, d)`."
    ### BEGIN SOLUTION
    alpha_hat = torch.cat([z, z_s], -1).softmax(-1)
    beta = alpha_hat[:, -1:]
    c = (z.softmax(-1)[..., None] * V).sum(1)
    return alpha_hat, beta, beta * s + (1 - beta) * c
    ### END SOLUTION


# %% test id=a6_combine_test points=3
a_hat, beta, c_hat = adaptive_context(
    torch.randn(B, L), torch.randn(B, 1), torch.randn(B, L, d), torch.randn(B, d)
)
assert a_hat.shape == (B, L + 1) and beta.shape == (B, 1) and c_hat.shape == (B, d), (
    "shapes (B, L+1), (B, 1), (B, d)"
)
check_close(a_hat.sum(-1), torch.ones(B), "Σ α̂_t")
check_close(
    beta,
    a_hat[:, -1:],
    "β_t must be α̂_t's LAST entry, the sentinel's share of the softmax over all L + 1 "
    "scores",
)
s_probe, V_probe = torch.ones(1, d), torch.zeros(1, L, d)
a1, b1, c1 = adaptive_context(
    torch.zeros(1, L), torch.tensor([[30.0]]), V_probe, s_probe
)
check_close(
    b1,
    torch.ones(1, 1),
    "β_t when the sentinel's score is far above the regions': β = α̂[L+1] ≈ 1 (the "
    "sentinel is the LAST entry)",
)
check_close(
    c1,
    s_probe,
    "ĉ_t when β ≈ 1: the sentinel s_t (ĉ = β s + (1 − β) c, not the other way round)",
    tol=1e-4,
)
V_rows = torch.arange(float(L * d)).view(1, L, d)
_, b0, c0 = adaptive_context(
    torch.zeros(1, L), torch.zeros(1, 1), V_rows, torch.zeros(1, d)
)
check_close(
    b0,
    torch.full((1, 1), 1 / (L + 1)),
    "β_t when all L + 1 scores are 0: the softmax gives every entry 1/(L + 1)",
)
check_close(
    c0,
    (1 - 1 / (L + 1)) * V_rows.mean(1),
    "ĉ_t when all scores are 0 and s_t = 0: (1 − β_t) times the plain mean of the "
    "regions (c_t uses α_t = softmax(z_t) over the L regions alone, which sums to 1)",
)


# %% check id=a6_combine_test
def calls():
    seed_everything(62)
    z, z_s, V, s = (
        torch.randn(4, 7),
        torch.randn(4, 1),
        torch.randn(4, 7, 5),
        torch.randn(4, 5),
    )
    return [("adaptive_context", (z, z_s, V, s), {})]


def outputs(results):
    a_hat, beta, c_hat = results[0]
    return {"α̂_t": a_hat, "β_t": beta, "ĉ_t = β_t s_t + (1 − β_t) c_t": c_hat}


# %% md
# ## 3. One step of the top-down captioner (5 points)
#
# BUTD's state is `(h1, c1, h2, c2, v, gates_v, keys)`: the attention LSTM's state
# (superscript 1), the language LSTM's (superscript 2), the region features `v (B, R,
# D)`, and two per-image constants you may ignore (they only speed things up). With
# $\bar v = \frac1R \sum_i v_i$ and $\Pi_t$ the previous word:
#
# $$x^1_t = [h^2_{t-1};\ \bar v;\ W_e \Pi_t], \qquad
#   h^1_t = \mathrm{LSTM}_1(x^1_t, h^1_{t-1}),$$
# $$\alpha_t = \mathrm{softmax}\big(w_a^\top \tanh(W_{va} v_i + W_{ha} h^1_t)\big),
#   \qquad
#   \hat v_t = \sum_i \alpha_{ti} v_i,$$
# $$x^2_t = [\hat v_t;\ h^1_t], \qquad h^2_t = \mathrm{LSTM}_2(x^2_t, h^2_{t-1}), \qquad
#   p(y_t) = \mathrm{softmax}(W_p h^2_t + b_p).$$
#
# The modules: `model.embed` ($W_e$), `model.att_lstm` and `model.lang_lstm`
# (`nn.LSTMCell`s with the inputs in the order above), `model.attention` (call it as
# `model.attention(model.attention.keys(v), v, h1)` → `alpha, v_hat`), `model.W_p`.
# Return the log-probabilities `(B, V)`, the new state (the same 7-tuple; keep `v`,
# `gates_v`, `keys` as they are) and `alpha (B, R)`. Dropout is off in these tests.


# %% solution id=a6_butd
def butd_step(model, words, state):
    "log p(y_t | y_<t) `(B, V)`, the new state, α_t `(B, R)`."
    ### BEGIN SOLUTION
    h1, c1, h2, c2, v, gates_v, keys = state
    x1 = torch.cat(
        [h2, v.mean(1), model.embed(words)], 1
    )  # top-down: the language LSTM's h²_{t−1}
    h1, c1 = model.att_lstm(x1, (h1, c1))
    alpha, v_hat = model.attention(model.attention.keys(v), v, h1)
    h2, c2 = model.lang_lstm(torch.cat([v_hat, h1], 1), (h2, c2))
    return model.W_p(h2).log_softmax(-1), (h1, c1, h2, c2, v, gates_v, keys), alpha
    ### END SOLUTION


# %% test id=a6_butd_attention_test points=3
seed_everything(1)
butd = BUTDCaptioner(
    11, 8, embed_dim=E, hidden_dim=d, attention_dim=5, dropout=0.0
).eval()
regions = torch.randn(B, L, 8)
lp, st, alpha = butd_step(butd, torch.full((B,), 1), butd.init_state(regions))
assert lp.shape == (B, 11) and alpha.shape == (B, L) and len(st) == 7, (
    "shapes: (B, V), a 7-tuple, (B, R)"
)
check_close(alpha.sum(-1), torch.ones(B), "Σ_i α_ti over the regions")
st2 = tuple(t.clone() for t in st)
st2[2].add_(1.0)  # another h²_{t−1}
_, st_next, _ = butd_step(butd, torch.full((B,), 3), st)
_, st_next2, _ = butd_step(butd, torch.full((B,), 3), st2)
assert not torch.allclose(st_next[0], st_next2[0]), (
    "h¹_t does not depend on h²_{t−1}: the attention LSTM's input is "
    "[h²_{t−1}; v̄; W_e Π_t] (top-down)"
)
_, _, alpha_word3 = butd_step(butd, torch.full((B,), 3), butd.init_state(regions))
assert not torch.allclose(alpha, alpha_word3), (
    "α_t at the first step is the same for two different words: attend with the new "
    "h¹_t (after the attention LSTM has read the word), not h¹_{t−1}"
)
lp_twice, st_twice, _ = butd_step(
    butd, torch.full((B,), 1), butd.init_state(torch.cat([regions, regions], 1))
)
check_close(
    lp_twice,
    lp,
    "log p(y_t) with every region listed twice: v̄ (a MEAN) and v̂ (α splits over the "
    "copies) are unchanged, so the words must be too",
    tol=1e-4,
)


# %% check id=a6_butd_attention_test
WORDS = ([1, 1, 1, 1], [5, 3, 9, 2], [4, 4, 7, 12])  # from step 2 on, h²_{t−1} ≠ 0


def calls():
    """A small BUTD captioner (built in the sandbox) and three steps of butd_step, each
    from the state the previous one returned."""
    from sat_tutorial.butd_beyond import BUTDCaptioner

    seed_everything(63)
    config = {"embed_dim": 4, "hidden_dim": 6, "attention_dim": 5, "dropout": 0.0}
    m = BUTDCaptioner(13, 8, **config).eval()
    with torch.no_grad():
        state = m.init_state(torch.randn(4, 6, 8))
    steps = [build(BUTDCaptioner, (13, 8), config, m.state_dict(), eval=True)]
    for w in WORDS:
        previous = state if len(steps) == 1 else ref(len(steps) - 1, 1)
        steps.append(call("butd_step", ref(0), torch.tensor(w), previous))
    return steps


def outputs(results):
    out = {}
    for t, (lp, state, alpha) in enumerate(results[1:], start=1):
        out[f"α_t at step {t}"] = alpha
        out[f"h¹_t (the attention LSTM) at step {t}"] = state[0]
    return out


# %% test id=a6_butd_words_test points=2
check_close(lp.exp().sum(-1), torch.ones(B), "Σ p(y_t): return LOG-probabilities")
check_close(st[4], regions, "the state keeps v unchanged")
import copy

deaf = copy.deepcopy(butd)
D_r = regions.shape[-1]  # region feature size: x²_t = [v̂_t (D_r); h¹_t (d)]
with torch.no_grad():
    deaf.lang_lstm.weight_ih[:, D_r:].zero_()  # the language LSTM's weights for h¹_t
same = torch.randn(1, 1, D_r).expand(B, L, D_r)  # identical regions: v̂_t = that one
h2_a = butd_step(deaf, torch.full((B,), 3), deaf.init_state(same))[1][2]
h2_b = butd_step(deaf, torch.full((B,), 5), deaf.init_state(same))[1][2]
check_close(
    h2_a,
    h2_b,
    "h²_t with the language LSTM's weights for h¹_t zeroed and identical regions: it "
    "must not depend on the word (its input is [v̂_t; h¹_t], in that order)",
)


# %% check id=a6_butd_words_test
WORDS = ([1, 1, 1, 1], [5, 3, 9, 2], [4, 4, 7, 12])  # from step 2 on, h²_{t−1} ≠ 0


def calls():
    """A small BUTD captioner (built in the sandbox) and three steps of butd_step, each
    from the state the previous one returned."""
    from sat_tutorial.butd_beyond import BUTDCaptioner

    seed_everything(63)
    config = {"embed_dim": 4, "hidden_dim": 6, "attention_dim": 5, "dropout": 0.0}
    m = BUTDCaptioner(13, 8, **config).eval()
    with torch.no_grad():
        state = m.init_state(torch.randn(4, 6, 8))
    steps = [build(BUTDCaptioner, (13, 8), config, m.state_dict(), eval=True)]
    for w in WORDS:
        previous = state if len(steps) == 1 else ref(len(steps) - 1, 1)
        steps.append(call("butd_step", ref(0), torch.tensor(w), previous))
    return steps


def outputs(results):
    out = {}
    for t, (lp, state, alpha) in enumerate(results[1:], start=1):
        out[f"h²_t (the language LSTM) at step {t}"] = state[2]
        out[f"log p(y_t) at step {t}"] = lp
    return out


# %% forbid
# sat_tutorial.adaptive_attention:VisualSentinel.forward
# sat_tutorial.adaptive_attention:AdaptiveAttention.combine
# sat_tutorial.butd_beyond:BUTDCaptioner.step
# sat_tutorial.butd_beyond:BUTDCaptioner._recurrence
# sat_tutorial.butd:PaperBUTDCaptioner.step
# sat_tutorial.butd:PaperBUTDCaptioner._recurrence
