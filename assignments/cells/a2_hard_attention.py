# %% md
# # A2 — Hard attention and REINFORCE (Show, Attend and Tell, §4.1)
#
# Follows notebook `07_hard_attention`. Hard attention reads **one** location $s_t$ per word, drawn from
# $\mathrm{Multinoulli}_L(\alpha_t)$, and is trained on the lower bound
# $L_s = \sum_s p(s \mid a) \log p(y \mid s, a)$ with a sampled (REINFORCE) gradient. You write the sampler, the
# log-probability and entropy of a location sequence, the moving-average baseline and the per-caption surrogate whose
# gradient is the learning rule. The hidden tests check your estimator against the **exact** gradient of $L_s$,
# computed by enumerating every location sequence of a tiny model (`lower_bound_by_enumeration`, as in the notebook).
#
# Write your code between `# YOUR CODE HERE` / `raise NotImplementedError()` (delete both). 10 points.

# %%
import math
import torch
from sat_tutorial.core import check_close, seed_everything
from sat_tutorial.hard_attention import (
    HardAttentionCaptioner,
    attention_entropy,
    location_log_prob,
    location_sequences,
    lower_bound_by_enumeration,
    reinforce_surrogate,
)
from sat_tutorial.soft_attention import target_mask, word_nll

torch.set_num_threads(1)

# %% md
# ## 1. Sampling $\tilde s_t \sim \mathrm{Multinoulli}_L(\alpha_t)$ (2 points)
#
# For each row of `alpha (B, L)` draw one location index with probability $\alpha_{t,i}$. Return a `(B,)` tensor of
# integer indices (`torch.long`). Use torch's random number generator (so that seeding makes it repeatable); a location
# with $\alpha_{t,i} = 0$ must never be drawn.


# %% solution id=a2_sample
def sample_locations(alpha):
    "One location per row of `alpha (B, L)`: `(B,)` long indices, index i with probability α_i."
    ### BEGIN SOLUTION
    return torch.multinomial(alpha.detach(), 1).squeeze(1)
    ### END SOLUTION


# %% test id=a2_sample_test points=2
s = sample_locations(torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
assert s.shape == (2,) and s.dtype == torch.long, (
    "sample_locations must return a (B,) long tensor"
)
assert s.tolist() == [1, 2], (
    "with all the mass on one location, that location must be drawn"
)
### BEGIN HIDDEN TESTS
seed_everything(21)
probs = torch.tensor(
    [
        [0.05, 0.1, 0.2, 0.3, 0.35],
        [0.9, 0.025, 0.025, 0.025, 0.025],
        [0.2, 0.0, 0.4, 0.2, 0.2],
    ]
)
n = 20_000
draws = sample_locations(probs.repeat(n, 1)).view(
    n, 3
)  # rows of one image are probs[i]
assert draws.min() >= 0 and draws.max() < 5, "indices out of range"
counts = torch.nn.functional.one_hot(draws, 5).sum(0).double()  # (3, L)
assert counts[2, 1] == 0, "a location with α = 0 was drawn"
chi2 = (
    ((counts - n * probs) ** 2 / (n * probs).clamp_min(1e-12))
    .where(probs > 0, torch.zeros(()))
    .sum(-1)
)
dof = (probs > 0).sum(-1) - 1
p_values = torch.special.gammaincc(
    dof / 2, chi2 / 2
)  # Pearson's goodness-of-fit test per row
assert (p_values > 1e-4).all(), (
    f"the draws do not follow α (chi-square p-values {p_values.numpy().round(6)})"
)
### END HIDDEN TESTS

# %% md
# ## 2. $\log p(s \mid a)$ and the entropy $H[s]$ (2 points)
#
# $$\log p(s \mid a) = \sum_{t} \log \alpha_{t, s_t}, \qquad H[s] = -\sum_{t} \sum_{i=1}^{L} \alpha_{t,i} \log \alpha_{t,i},$$
#
# each summed over the steps that predict a real word only (`mask (B, T)` True there). `alpha` is `(B, T, L)`, `s` is
# `(B, T)` (long). Return `(B,)` each. Some $\alpha_{t,i}$ may be exactly 0: take $0 \log 0 = 0$.


# %% solution id=a2_logp
def log_p_s(alpha, s, mask):
    "log p(s|a) = Σ_t log α_{t,s_t} per caption `(B,)`, over the real-word steps."
    ### BEGIN SOLUTION
    return (alpha.gather(-1, s[..., None]).squeeze(-1).log() * mask).sum(1)
    ### END SOLUTION


def entropy(alpha, mask):
    "H[s] = −Σ_t Σ_i α_ti log α_ti per caption `(B,)`, over the real-word steps."
    ### BEGIN SOLUTION
    return (-torch.xlogy(alpha, alpha).sum(-1) * mask).sum(1)
    ### END SOLUTION


# %% test id=a2_logp_test points=1
al = torch.full((1, 2, 4), 0.25)
check_close(
    log_p_s(al, torch.tensor([[0, 3]]), torch.ones(1, 2)),
    torch.tensor([2 * math.log(0.25)]),
    "log p(s|a)",
)
### BEGIN HIDDEN TESTS
seed_everything(22)
al = torch.randn(3, 4, 5).softmax(-1)
s = torch.randint(0, 5, (3, 4))
m = target_mask(
    torch.ones(3, 5, dtype=torch.long), torch.tensor([5, 3, 2])
)  # padded steps must not count
check_close(
    log_p_s(al, s, m), location_log_prob(al, s, m), "log p(s|a) with padded captions"
)
### END HIDDEN TESTS

# %% test id=a2_entropy_test points=1
check_close(
    entropy(torch.full((1, 1, 8), 1 / 8), torch.ones(1, 1)),
    torch.tensor([math.log(8)]),
    "H of a uniform α over 8 locations",
)
### BEGIN HIDDEN TESTS
seed_everything(23)
al = torch.randn(3, 4, 5).softmax(-1)
al[0, 0] = torch.tensor([0.5, 0.5, 0.0, 0.0, 0.0])  # exact zeros
m = target_mask(torch.ones(3, 5, dtype=torch.long), torch.tensor([5, 3, 2]))
check_close(
    entropy(al, m),
    attention_entropy(al, m),
    "H[s] (with α = 0 entries and padded captions)",
)
### END HIDDEN TESTS

# %% md
# ## 3. The moving-average baseline (1 point)
#
# Xu et al. subtract a baseline from the reward, an exponential moving average over mini-batches,
# $b_k = 0.9\, b_{k-1} + 0.1 \log p(y \mid \tilde s_k, a)$, where the reward is the batch's mean
# $\log p(y \mid \tilde s, a)$. The paper does not say what $b_0$ is; here the first update ($k = 1$) sets $b$ to the
# reward. Return $b_k$ (a float) from $b_{k-1}$, the number `k` of this update (1 for the first) and the reward.


# %% solution id=a2_baseline
def update_baseline(b_prev, k, reward, decay=0.9):
    "b_k = decay·b_{k−1} + (1 − decay)·reward; the first update (k = 1) sets b = reward."
    ### BEGIN SOLUTION
    return float(reward) if k == 1 else decay * b_prev + (1 - decay) * float(reward)
    ### END SOLUTION


# %% test id=a2_baseline_test points=1
assert abs(update_baseline(0.0, 1, -12.0) - (-12.0)) < 1e-9, (
    "the first update sets b to the reward"
)
### BEGIN HIDDEN TESTS
b = update_baseline(0.0, 1, -20.0)
for k, r in enumerate([-18.0, -15.0, -11.0], start=2):
    b = update_baseline(b, k, r)
want = -20.0
for r in [-18.0, -15.0, -11.0]:
    want = 0.9 * want + 0.1 * r
assert abs(b - want) < 1e-9, f"after four updates b should be {want:.4f}, got {b:.4f}"
assert abs(update_baseline(-10.0, 5, 0.0, decay=0.5) - (-5.0)) < 1e-9, (
    "the decay argument is not used"
)
### END HIDDEN TESTS

# %% md
# ## 4. The REINFORCE surrogate (5 points)
#
# The gradient of $L_s$ is an expectation under $p(s \mid a)$; for one sampled $\tilde s$, with baseline $b$ and the
# entropy bonus,
#
# $$\frac{\partial L_s}{\partial W} \approx \frac{\partial \log p(y \mid \tilde s, a)}{\partial W}
#   + \lambda_r \big(\log p(y \mid \tilde s, a) - b\big) \frac{\partial \log p(\tilde s \mid a)}{\partial W}
#   + \lambda_e \frac{\partial H[\tilde s]}{\partial W}.$$
#
# Write the per-caption scalar $\ell$ `(B,)` whose gradient (by autograd) is exactly this: the inputs are tensors
# `log_py (B,)`, `log_ps (B,)`, `H (B,)` that carry gradients, and a number `b`. Think about which factor must not be
# differentiated. Training then minimises $-\sum \ell / \#\text{words}$.


# %% solution id=a2_surrogate
def surrogate(log_py, log_ps, H, b, lambda_r=1.0, lambda_e=0.0):
    "Per-caption ℓ `(B,)` whose gradient is the REINFORCE learning rule with baseline b and entropy bonus."
    ### BEGIN SOLUTION
    return log_py + lambda_r * (log_py.detach() - b) * log_ps + lambda_e * H
    ### END SOLUTION


# %% test id=a2_surrogate_test points=2
lp_y = torch.tensor([-12.0, -7.0], requires_grad=True)
lp_s = torch.tensor([-3.0, -1.0], requires_grad=True)
Hs = torch.tensor([4.0, 2.0], requires_grad=True)
ell = surrogate(lp_y, lp_s, Hs, -10.0, lambda_r=0.5, lambda_e=0.01)
assert ell.shape == (2,), "ℓ must be one number per caption, (B,)"
### BEGIN HIDDEN TESTS
ell.sum().backward()
want = [t.clone().requires_grad_() for t in (lp_y.detach(), lp_s.detach(), Hs.detach())]
reinforce_surrogate(
    want[0], want[1], want[2], -10.0, torch.ones(2), lambda_r=0.5, lambda_e=0.01
).sum().backward()
check_close(
    lp_y.grad,
    want[0].grad,
    "∂ℓ/∂log p(y|s̃) (the reward must not be differentiated through the REINFORCE term)",
)
check_close(lp_s.grad, want[1].grad, "∂ℓ/∂log p(s̃|a) (should be λ_r (log p(y|s̃) − b))")
check_close(Hs.grad, want[2].grad, "∂ℓ/∂H")
### END HIDDEN TESTS

# %% md
# **The check that decides**: on a tiny model (3 locations, captions of 3 and 2 words: 27 + 9 location sequences),
# every sequence's estimate $g(s)$ is computed with your `surrogate`, and its exact mean $\sum_s p(s \mid a)\, g(s)$
# must equal the exact gradient of $-\sum L_s / \#\text{words}$, for any baseline; and a baseline near the mean reward
# must cut the estimator's variance at least in half against $b = 0$.

# %% test id=a2_enumeration_test points=3
seed_everything(0)
tiny = HardAttentionCaptioner(
    6, 4, embed_dim=4, hidden_dim=5, attention_dim=4, dropout=0.0
).double()
with torch.no_grad():
    for p in tiny.parameters():
        p.mul_(2.0)  # α far from uniform: locations matter
tf = torch.randn(2, 3, 4, dtype=torch.float64) * 2  # (B=2, L=3, D=4)
tc, tl = torch.tensor([[1, 4, 5, 2], [1, 3, 2, 0]]), torch.tensor([4, 3])
n_words = int((tl - 1).sum())
params = list(tiny.parameters())


def flat_grad():
    return torch.cat(
        [
            (p.grad if p.grad is not None else torch.zeros_like(p)).flatten()
            for p in params
        ]
    )


def estimates(b):
    "g(s) `(K_i, P)` and p(s|a) `(K_i,)` for every location sequence of each tiny image, through `surrogate`."
    G, P = [], []
    for i in range(2):
        S = location_sequences(int(tl[i]) - 1, 3, 3)
        K = len(S)
        c, l = tc[i : i + 1].expand(K, -1), tl[i : i + 1].expand(K)
        logits, alpha, _ = tiny.rollout(tf[i : i + 1].expand(K, -1, -1), c, l, s=S)
        log_py, log_ps = (
            -word_nll(logits, c, l).sum(1),
            location_log_prob(alpha, S, target_mask(c, l)),
        )
        ell = surrogate(
            log_py, log_ps, torch.zeros(K, dtype=torch.float64), b, 1.0, 0.0
        )
        assert ell.shape == (K,), "ℓ must be (B,)"
        rows = []
        for k in range(K):
            tiny.zero_grad()
            (-ell[k] / n_words).backward(retain_graph=True)
            rows.append(flat_grad())
        G.append(torch.stack(rows))
        P.append(log_ps.detach().exp())
    return G, P


L_s, _ = lower_bound_by_enumeration(tiny, tf, tc, tl)
tiny.zero_grad()
(-L_s.sum() / n_words).backward()
exact = flat_grad()
print(exact.numel(), "parameters")


### BEGIN HIDDEN TESTS
def moments(G, P):
    mean = sum((p[:, None] * g).sum(0) for g, p in zip(G, P))
    var = sum(
        (p[:, None] * (g - (p[:, None] * g).sum(0)) ** 2).sum(0) for g, p in zip(G, P)
    )
    return mean, float(var.sum())


G0, P0 = estimates(0.0)
rewards = []
for i, p in enumerate(P0):  # E_s[log p(y|s,a)] per image, by enumeration
    S = location_sequences(int(tl[i]) - 1, 3, 3)
    K = len(S)
    c, l = tc[i : i + 1].expand(K, -1), tl[i : i + 1].expand(K)
    with torch.no_grad():
        lg, _, _ = tiny.rollout(tf[i : i + 1].expand(K, -1, -1), c, l, s=S)
    rewards.append(float((p * -word_nll(lg, c, l).sum(1)).sum()))
b_good = sum(rewards) / len(rewards)
for b in (0.0, -5.0, b_good):
    mean, _ = moments(*estimates(b))
    check_close(
        mean,
        exact,
        f"the estimator's exact mean with b = {b:.2f} (it must be unbiased, whatever b is)",
        tol=1e-8,
    )
var_0, var_good = moments(G0, P0)[1], moments(*estimates(b_good))[1]
assert var_good < 0.5 * var_0, (
    f"a baseline near the mean reward ({b_good:.2f}) should cut the variance: {var_good:.3g} against {var_0:.3g} with b = 0"
)
### END HIDDEN TESTS
