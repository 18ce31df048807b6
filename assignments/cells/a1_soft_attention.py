# %% md
# # A1 — Soft attention (Show, Attend and Tell, §4.2)
#
# Follows notebook `06_soft_attention`. You write the five pieces of deterministic soft attention; everything else
# (the modules holding the weights, the data) comes from `sat_tutorial`. Write your code between the lines
# `# YOUR CODE HERE` / `raise NotImplementedError()` (delete both). Run the test cell under each part: it gives a first
# signal. Hidden tests decide the grade (10 points): they compare your functions with the package's on fresh inputs
# and look for the usual mistakes.
#
# Shapes: `B` images, `L` locations (grid cells), `D` annotation size, `H` LSTM size, `A` attention size, `T` steps.

# %%
import torch
from sat_tutorial.core import check_close, seed_everything
from sat_tutorial.soft_attention import (
    SoftAttention,
    SoftAttentionCaptioner,
    doubly_stochastic_penalty,
    target_mask,
)

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
# $$e_{ti} = w^\top \tanh(W_a a_i + W_h h_{t-1} + b), \qquad \alpha_{ti} = \frac{\exp e_{ti}}{\sum_{k=1}^{L} \exp e_{tk}}, \qquad \hat z_t = \sum_{i=1}^{L} \alpha_{ti}\, a_i .$$
#
# `att.W_a` (a `nn.Linear` whose bias is $b$), `att.W_h` (no bias) and `att.w` (a `nn.Linear` to one output) hold the
# weights. Return `alpha (B, L)` and `z (B, D)`.


# %% solution id=a1_attend
def attend(att, feats, h):
    "α_t `(B, L)` and ẑ_t `(B, D)` from annotations `feats (B, L, D)` and h_{t−1} `(B, H)`."
    ### BEGIN SOLUTION
    e = att.w(torch.tanh(att.W_a(feats) + att.W_h(h)[:, None])).squeeze(-1)  # (B, L)
    alpha = e.softmax(-1)  # over the L locations
    z = (alpha[..., None] * feats).sum(1)  # (B, D)
    return alpha, z
    ### END SOLUTION


# %% test id=a1_attend_test points=3
alpha, z = attend(att, feats, h)
assert alpha.shape == (B, L) and z.shape == (B, D), "alpha must be (B, L) and z (B, D)"
check_close(alpha.sum(-1), torch.ones(B), "Σ_i α_ti (each row of α must sum to 1)")
### BEGIN HIDDEN TESTS
seed_everything(11)
att2 = SoftAttention(feature_dim=5, hidden_dim=3, attention_dim=4)
f2, h2 = (
    torch.randn(4, 7, 5),
    torch.randn(4, 3),
)  # B=4, L=7: a softmax over the wrong axis cannot pass
a_ref, z_ref = att2(att2.keys(f2), f2, h2)
a_got, z_got = attend(att2, f2, h2)
check_close(a_got, a_ref, "α")
check_close(z_got, z_ref, "ẑ_t")
### END HIDDEN TESTS

# %% md
# ## 2. The gating scalar β (2 points)
#
# §4.2.1: the context is scaled by $\beta_t = \sigma(f_\beta(h_{t-1}))$, a scalar per image, so that the model can say
# how much it wants to use the image at this word: $\phi(\{a_i\}, \{\alpha_i\}) = \beta_t \sum_i \alpha_{ti} a_i$.
# `f_beta` is a `nn.Linear(H, 1)`. Return the gated context `(B, D)`.


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
### BEGIN HIDDEN TESTS
seed_everything(12)
model = SoftAttentionCaptioner(
    9, D, embed_dim=5, hidden_dim=H, attention_dim=A, dropout=0.0, beta_gate=True
)
h3, z3 = torch.randn(4, H), torch.randn(4, D)
check_close(
    gated_context(model.f_beta, h3, z3), model.context(None, z3, None, h3), "β_t ẑ_t"
)
with torch.no_grad():
    model.f_beta.bias.fill_(-30.0)
    model.f_beta.weight.zero_()
check_close(
    gated_context(model.f_beta, h3, z3),
    torch.zeros(4, D),
    "β_t ẑ_t with β ≈ 0 (a sigmoid gate)",
    tol=1e-6,
)
### END HIDDEN TESTS

# %% md
# ## 3. The initial LSTM state (2 points)
#
# §3.1.2: the memory and hidden state are initialised from the mean annotation through two MLPs,
# $c_0 = \tanh(f_{init,c}(\frac1L \sum_i a_i))$ and $h_0 = \tanh(f_{init,h}(\frac1L \sum_i a_i))$.


# %% solution id=a1_init
def init_lstm_state(init_h, init_c, feats):
    "(h_0, c_0), each `(B, H)`, from `feats (B, L, D)`; `init_h`, `init_c` are `nn.Linear(D, H)`."
    ### BEGIN SOLUTION
    mean = feats.mean(1)  # (B, D)
    return torch.tanh(init_h(mean)), torch.tanh(init_c(mean))
    ### END SOLUTION


# %% test id=a1_init_test points=2
h0, c0 = init_lstm_state(torch.nn.Linear(D, H), torch.nn.Linear(D, H), feats)
assert h0.shape == (B, H) and c0.shape == (B, H), "h_0 and c_0 must be (B, H)"
### BEGIN HIDDEN TESTS
seed_everything(13)
model = SoftAttentionCaptioner(
    9, D, embed_dim=5, hidden_dim=H, attention_dim=A, dropout=0.0
)
f4 = torch.randn(4, 7, D) + 1.0
h_ref, c_ref, _, _ = model.init_state(f4)
h_got, c_got = init_lstm_state(model.init_h, model.init_c, f4)
check_close(h_got, h_ref, "h_0")
check_close(c_got, c_ref, "c_0")
### END HIDDEN TESTS

# %% md
# ## 4. The doubly stochastic penalty (3 points)
#
# §4.2.1: to make the model look at every part of the image over the course of the caption, the loss adds
# $\lambda \sum_i^{L} (1 - \sum_t^{C} \alpha_{ti})^2$. Sum over $t$ only over the steps that predict a real word:
# `mask (B, T)` is True there (padding steps must not count). `alpha` is `(B, T, L)`; return the penalty per caption
# `(B,)` (without λ).


# %% solution id=a1_penalty
def penalty(alpha, mask):
    "Σ_i (1 − Σ_t α_ti)² per caption `(B,)`, t over the real-word steps of `mask (B, T)`."
    ### BEGIN SOLUTION
    return ((1 - (alpha * mask[..., None]).sum(1)) ** 2).sum(-1)
    ### END SOLUTION


# %% test id=a1_penalty_test points=3
al = torch.full((1, 4, 2), 0.5)  # 4 steps, 2 locations, α spread evenly
test_mask = torch.ones(1, 4, dtype=torch.bool)
check_close(
    penalty(al, test_mask),
    torch.tensor([2.0]),
    "penalty of evenly spread α over 4 steps and 2 locations",
)
### BEGIN HIDDEN TESTS
seed_everything(14)
al = torch.randn(3, 6, 5).softmax(-1)
caps = torch.ones(3, 7, dtype=torch.long)
lengths = torch.tensor(
    [7, 4, 2]
)  # padded captions: steps past a caption's end must not count
m = target_mask(caps, lengths)
check_close(
    penalty(al, m), doubly_stochastic_penalty(al, m), "the penalty with padded captions"
)
check_close(
    penalty(al, torch.ones(3, 6, dtype=torch.bool)),
    doubly_stochastic_penalty(al, torch.ones(3, 6, dtype=torch.bool)),
    "the penalty",
)
### END HIDDEN TESTS
