# %% md
# # A1 — Soft attention (Show, Attend and Tell, §4.2)
#
# Follows notebook `06_soft_attention`. You write the five pieces of deterministic soft
# attention; everything else (the modules holding the weights, the data) comes from
# `sat_tutorial`. Write your code between the lines `# YOUR CODE HERE` / `raise
# NotImplementedError()` (delete both). Run the test cell under each part: it gives a
# first signal. The grader's checks decide the grade (10 points): they compare your
# functions with the solution's on fresh inputs and look for the usual mistakes.
#
# **What you may use.** torch, and the layers you are handed (`att.W_a`, `att.W_h`,
# `att.w`, `f_beta`, `init_h`, `init_c`). Write each answer yourself: copying code from
# the package (its source, its notebooks) or from anyone else into an answer is not
# allowed, whether pasted or read and executed while the notebook runs. While your
# notebook is graded, the package's implementations of what the parts ask for are not
# there: those functions raise `NotImplementedError` (`SoftAttention.forward` and
# `.scores`, `beta_gate`, `SoftAttentionCaptioner.context`, `.init_state` and
# `doubly_stochastic_penalty` among them); a part that relies on them scores 0. The
# grader runs your functions on its own inputs in a separate process and compares the
# results with the solution's; the tests below only help you.
#
# Shapes: `B` images, `L` locations (grid cells), `D` annotation size, `H` LSTM size,
# `A` attention size, `T` steps.

# %%
import torch
from sat_tutorial.core import check_close, seed_everything
from sat_tutorial.soft_attention import SoftAttention, SoftAttentionCaptioner

torch.set_num_threads(1)

seed_everything(0)
B, L, D, H, A = 3, 5, 4, 6, 7
att = SoftAttention(
    feature_dim=D, hidden_dim=H, attention_dim=A
)  # holds W_a (with b), W_h and w
feats = torch.randn(B, L, D)  # annotations a_i
h = torch.randn(B, H)  # h_{t-1}

# %% md
# ## 1. The attention MLP f_att, α and the context ẑ_t (3 points)
#
# $$e_{ti} = w^\top \tanh(W_a a_i + W_h h_{t-1} + b), \qquad
#   \alpha_{ti} = \frac{\exp e_{ti}}{\sum_{k=1}^{L} \exp e_{tk}}, \qquad
#   \hat z_t = \sum_{i=1}^{L} \alpha_{ti}\, a_i .$$
#
# `att.W_a` (a `nn.Linear` whose bias is $b$), `att.W_h` (no bias) and `att.w` (a
# `nn.Linear` to one output) hold the weights. Return `alpha (B, L)` and `z (B, D)`.


# %% solution id=a1_attend
def attend(att, feats, h):
    """α_t `(B, L)` and ẑ_t `(B, D)` from annotations `feats (B, L, D)` and h_{t−1} `(B,
    H)`."""
    ### BEGIN SOLUTION
    e = att.w(torch.tanh(att.W_a(feats) + att.W_h(h)[:, None])).squeeze(-1)  # (B, L)
    alpha = e.softmax(-1)  # over the L locations
    z = (alpha[..., None] * feats).sum(1)  # (B, D)
    return alpha, z
    ### END SOLUTION


# %% test id=a1_attend_test points=3
alpha, z = attend(att, feats, h)
assert alpha.shape == (B, L) and z.shape == (B, D), "alpha must be (B, L) and z (B, D)"
check_close(
    alpha.sum(-1),
    torch.ones(B),
    "Σ_i α_ti: each image's α must sum to 1 over its L locations (softmax over dim -1)",
)
check_close(
    z,
    torch.einsum("bl,bld->bd", alpha, feats),
    "ẑ_t must be Σ_i α_ti a_i, the α-weighted sum of the annotations",
)
alpha_other_h, _ = attend(att, feats, h + 1.0)
assert not torch.allclose(alpha, alpha_other_h), (
    "α does not change with h_{t−1}: the score must use W_h h_{t−1}"
)
with torch.no_grad():
    flat = SoftAttention(feature_dim=D, hidden_dim=H, attention_dim=A)
    flat.w.weight.zero_()
    flat.w.bias.zero_()
check_close(
    attend(flat, feats, h)[0],
    torch.full((B, L), 1 / L),
    "α when every score e_ti is 0 (it must be uniform, 1/L)",
)


# %% check id=a1_attend_test
SIZES = ((4, 7), (1, 3))  # B ≠ L: a softmax over dim 0 fails


def calls():
    from sat_tutorial.soft_attention import SoftAttention

    out = []
    for seed, (b, l) in zip((11, 12), SIZES):
        seed_everything(seed)
        config = {"feature_dim": 5, "hidden_dim": 3, "attention_dim": 4}
        att = SoftAttention(**config)
        out.append(build(SoftAttention, kwargs=config, state=att.state_dict()))
        feats, h = torch.randn(b, l, 5), torch.randn(b, 3)
        out.append(call("attend", ref(len(out) - 1), feats, h))
    return out


def outputs(results):
    out = {}
    for (b, l), (alpha, z) in zip(SIZES, results[1::2]):
        out[f"α (B={b}, L={l})"], out[f"ẑ_t (B={b}, L={l})"] = alpha, z
    return out


# %% md
# ## 2. The gating scalar β (2 points)
#
# §4.2.1: the context is scaled by $\beta_t = \sigma(f_\beta(h_{t-1}))$, a scalar per
# image, so that the model can say how much it wants to use the image at this word:
# $\phi(\{a_i\}, \{\alpha_i\}) = \beta_t \sum_i \alpha_{ti} a_i$. `f_beta` is a
# `nn.Linear(H, 1)`. Return the gated context `(B, D)`.


# %% solution id=a1_beta
def gated_context(f_beta, h, z):
    "β_t ẑ_t `(B, D)` with β_t = σ(f_β(h_{t−1})) `(B, 1)`."
    ### BEGIN SOLUTION
    return torch.sigmoid(f_beta(h)) * z
    ### END SOLUTION


# %% test id=a1_beta_test points=2
f_beta = torch.nn.Linear(H, 1)
zb = torch.randn(B, D)
assert gated_context(f_beta, h, zb).shape == (B, D), "the gated context must be (B, D)"
with torch.no_grad():
    f_beta.weight.zero_()
    f_beta.bias.fill_(30.0)
check_close(
    gated_context(f_beta, h, zb),
    zb,
    "β_t ẑ_t when f_β(h) = 30: β = σ(30) ≈ 1, so the context passes unchanged",
)
with torch.no_grad():
    f_beta.bias.fill_(0.0)
check_close(
    gated_context(f_beta, h, zb),
    zb / 2,
    "β_t ẑ_t when f_β(h) = 0: β = σ(0) = 1/2",
)


# %% check id=a1_beta_test
def calls():
    import copy

    from sat_tutorial.soft_attention import SoftAttentionCaptioner

    seed_everything(12)
    model = SoftAttentionCaptioner(
        9, 4, embed_dim=5, hidden_dim=6, attention_dim=7, dropout=0.0, beta_gate=True
    )
    h, z = torch.randn(4, 6), torch.randn(4, 4)
    closed = copy.deepcopy(model.f_beta)
    with torch.no_grad():
        closed.bias.fill_(-30.0)
        closed.weight.zero_()
    return [
        linear(model.f_beta),
        call("gated_context", ref(0), h, z),
        linear(closed),
        call("gated_context", ref(2), h, z),
    ]


def linear(layer):
    "An nn.Linear like `layer`, built in the sandbox."
    size = {"in_features": layer.in_features, "out_features": layer.out_features}
    return build(torch.nn.Linear, kwargs=size, state=layer.state_dict())


def outputs(results):
    return {"β_t ẑ_t": results[1], "β_t ẑ_t with β ≈ 0": results[3]}


# %% md
# ## 3. The initial LSTM state (2 points)
#
# §3.1.2: the memory and hidden state are initialised from the mean annotation through
# two MLPs, $c_0 = \tanh(f_{init,c}(\frac1L \sum_i a_i))$ and $h_0 =
# \tanh(f_{init,h}(\frac1L \sum_i a_i))$.


# %% solution id=a1_init
def init_lstm_state(init_h, init_c, feats):
    """(h_0, c_0), each `(B, H)`, from `feats (B, L, D)`; `init_h`, `init_c` are
    `nn.Linear(D, H)`."""
    ### BEGIN SOLUTION
    mean = feats.mean(1)  # (B, D)
    return torch.tanh(init_h(mean)), torch.tanh(init_c(mean))
    ### END SOLUTION


# %% test id=a1_init_test points=2
init_h, init_c = torch.nn.Linear(D, H), torch.nn.Linear(D, H)
h0, c0 = init_lstm_state(init_h, init_c, feats)
assert h0.shape == (B, H) and c0.shape == (B, H), "h_0 and c_0 must be (B, H)"
assert h0.abs().max() < 1 and c0.abs().max() < 1, "h_0 and c_0 pass through a tanh"
h0_twice, _ = init_lstm_state(init_h, init_c, torch.cat([feats, feats], 1))
check_close(
    h0_twice,
    h0,
    "h_0 from the annotations listed twice (the MEAN over the L locations, not the "
    "sum)",
)
check_close(
    init_lstm_state(init_h, init_c, feats.flip(1))[0],
    h0,
    "h_0 from the same annotations in reverse order: the mean over the L locations "
    "does not depend on their order (not the first or last location alone)",
)
with torch.no_grad():
    init_c.weight.zero_()
    init_c.bias.fill_(0.5)
check_close(
    init_lstm_state(init_h, init_c, feats)[1],
    torch.full((B, H), float(torch.tanh(torch.tensor(0.5)))),
    "c_0 = tanh(f_init,c(mean)) (is c_0 made by init_c, and returned second?)",
)


# %% check id=a1_init_test
def calls():
    from sat_tutorial.soft_attention import SoftAttentionCaptioner

    seed_everything(13)
    model = SoftAttentionCaptioner(
        9, 4, embed_dim=5, hidden_dim=6, attention_dim=7, dropout=0.0
    )
    feats = torch.randn(4, 7, 4) + 1.0
    return [
        linear(model.init_h),
        linear(model.init_c),
        call("init_lstm_state", ref(0), ref(1), feats),
    ]


def linear(layer):
    "An nn.Linear like `layer`, built in the sandbox."
    size = {"in_features": layer.in_features, "out_features": layer.out_features}
    return build(torch.nn.Linear, kwargs=size, state=layer.state_dict())


def outputs(results):
    h0, c0 = results[2]
    return {"h_0": h0, "c_0": c0}


# %% md
# ## 4. The doubly stochastic penalty (3 points)
#
# §4.2.1: to make the model look at every part of the image over the course of the
# caption, the loss adds $\lambda \sum_i^{L} (1 - \sum_t^{C} \alpha_{ti})^2$. Sum over
# $t$ only over the steps that predict a real word: `mask (B, T)` is True there (padding
# steps must not count). `alpha` is `(B, T, L)`; return the penalty per caption `(B,)`
# (without λ).


# %% solution id=a1_penalty
def penalty(alpha, mask):
    """Σ_i (1 − Σ_t α_ti)² per caption `(B,)`, t over the real-word steps of `mask (B,
    T)`."""
    ### BEGIN SOLUTION
    return ((1 - (alpha * mask[..., None]).sum(1)) ** 2).sum(-1)
    ### END SOLUTION


# %% test id=a1_penalty_test points=3
al = torch.full((1, 4, 2), 0.5)  # 4 steps, 2 locations, α spread evenly
test_mask = torch.ones(1, 4, dtype=torch.bool)
check_close(
    penalty(al, test_mask),
    torch.tensor([2.0]),
    "penalty of evenly spread α over 4 steps and 2 locations: 2 · (1 − 4·0.5)² = 2",
)
half_mask = torch.tensor([[True, True, False, False]])
check_close(
    penalty(al, half_mask),
    torch.tensor([0.0]),
    "penalty with the last 2 of 4 steps padding (mask False): they must not count",
)


# %% check id=a1_penalty_test
def calls():
    seed_everything(14)
    al = torch.randn(3, 6, 5).softmax(-1)
    lengths = torch.tensor([6, 3, 1])  # padded captions
    mask = torch.arange(6)[None] < lengths[:, None]
    full = torch.ones(3, 6, dtype=torch.bool)
    return [("penalty", (al, mask), {}), ("penalty", (al.clone(), full), {})]


def outputs(results):
    return {"the penalty with padded captions": results[0], "the penalty": results[1]}


# %% forbid
# sat_tutorial.soft_attention:SoftAttention.forward
# sat_tutorial.soft_attention:SoftAttention.scores
# sat_tutorial.soft_attention_beyond:additive_scores
# sat_tutorial.soft_attention_beyond:FastSoftAttention.scores
# sat_tutorial.soft_attention:beta_gate
# sat_tutorial.soft_attention:SoftAttentionCaptioner.context
# sat_tutorial.soft_attention:SoftAttentionDecoder.init_state
# sat_tutorial.soft_attention:doubly_stochastic_penalty
