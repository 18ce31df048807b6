# %% md
# # A2 — Hard attention and REINFORCE (Show, Attend and Tell, §4.1)
#
# Follows notebook `07_hard_attention`. Hard attention reads **one** location $s_t$ per
# word, drawn from $\mathrm{Multinoulli}_L(\alpha_t)$, and is trained on the lower bound
# $L_s = \sum_s p(s \mid a) \log p(y \mid s, a)$ with a sampled (REINFORCE) gradient.
# You write the sampler, the log-probability and entropy of a location sequence, the
# moving-average baseline and the per-caption surrogate whose gradient is the learning
# rule. The grader's checks test your estimator against the **exact** gradient of $L_s$,
# computed by enumerating every location sequence of a tiny model (as
# `lower_bound_by_enumeration` does in the notebook).
#
# **What you may use.** torch (`torch.multinomial`, `torch.xlogy`, …) and the given
# code. Write each answer yourself: copying code from the package (its source, its
# notebooks) or from anyone else into an answer is not allowed, whether pasted or read
# and executed while the notebook runs. While your notebook is graded, the package's
# implementations of what the parts ask for are not there: those functions raise
# `NotImplementedError` (`sample_locations`, `location_log_prob(s)`,
# `attention_entropy`, `reinforce_surrogate` and `update_baseline` among them, and with
# them `lower_bound_by_enumeration`); a part that relies on them scores 0. The grader
# runs your functions on its own inputs in a separate process and compares the results
# with the solution's; the tests below only help you.
#
# Write your code between `# YOUR CODE HERE` / `raise NotImplementedError()` (delete
# both). 10 points.

# %%
import math
import torch
from sat_tutorial.core import check_close, seed_everything
from sat_tutorial.hard_attention import HardAttentionCaptioner, location_sequences
from sat_tutorial.soft_attention import target_mask, word_nll

torch.set_num_threads(1)

# %% md
# ## 1. Sampling $\tilde s_t \sim \mathrm{Multinoulli}_L(\alpha_t)$ (2 points)
#
# For each row of `alpha (B, L)` draw one location index with probability
# $\alpha_{t,i}$. Return a `(B,)` tensor of integer indices (`torch.long`). Use torch's
# random number generator (so that seeding makes it repeatable); a location with
# $\alpha_{t,i} = 0$ must never be drawn.


# %% solution id=a2_sample
def sample_locations(alpha):
    """One location per row of `alpha (B, L)`: `(B,)` long indices, index i with
    probability α_i."""
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
seed_everything(0)
draws = sample_locations(torch.tensor([[0.2, 0.8]]).repeat(4000, 1))
share = float(draws.float().mean())
assert 0.75 < share < 0.85, (
    f"location 1 has α = 0.8 but was drawn {share:.0%} of the time: draw from α itself "
    "(not its argmax, not uniformly)"
)


# %% check id=a2_sample_test
N_DRAWS = 20_000  # draws per row
KEPT = {}  # what calls() keeps for the comparison (on the grader's side)


def calls():
    seed_everything(21)
    probs = torch.rand(3, 5) + 0.1
    probs[1, 0] += 8.0  # one location almost always drawn
    probs[2, 1] = 0.0  # one never drawn
    KEPT["probs"] = probs = probs / probs.sum(-1, keepdim=True)
    return [call("sample_locations", probs.repeat(N_DRAWS, 1))]


def outputs(results):
    return results[0]


def compare(got, want):
    draws, probs, n = got, KEPT["probs"], N_DRAWS
    if not isinstance(draws, torch.Tensor):
        raise Mismatch(f"the draws: a tensor was expected, got {shown(draws)}")
    if tuple(draws.shape) != (3 * n,) or draws.is_floating_point():
        raise Mismatch(f"the draws: shape {tuple(draws.shape)}, expected ({3 * n},)")
    draws = draws.long().view(n, 3)
    if draws.min() < 0 or draws.max() >= 5:
        raise Mismatch("the draws: indices out of range")
    counts = torch.nn.functional.one_hot(draws, 5).sum(0).double()  # (3, L)
    if counts[2, 1] != 0:
        raise Mismatch("a location with α = 0 was drawn")
    expected = n * probs.double()
    chi2 = (counts - expected) ** 2 / expected.clamp_min(1e-12)
    chi2 = chi2.where(probs > 0, torch.zeros(())).sum(-1)
    dof = (probs > 0).sum(-1) - 1
    p_values = torch.special.gammaincc(dof / 2, chi2 / 2)  # Pearson's test per row
    if not bool((p_values > 1e-4).all()):
        raise Mismatch(f"the draws do not follow α (chi-square p-values {p_values})")


# %% md
# ## 2. $\log p(s \mid a)$ and the entropy $H[s]$ (2 points)
#
# $$\log p(s \mid a) = \sum_{t} \log \alpha_{t, s_t}, \qquad
#   H[s] = -\sum_{t} \sum_{i=1}^{L} \alpha_{t,i} \log \alpha_{t,i},$$
#
# each summed over the steps that predict a real word only (`mask (B, T)` True there).
# `alpha` is `(B, T, L)`, `s` is `(B, T)` (long). Return `(B,)` each. Some
# $\alpha_{t,i}$ may be exactly 0: take $0 \log 0 = 0$.


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
    "log p(s|a) of two steps with α = 1/4 everywhere: 2 log(1/4)",
)
al2 = torch.tensor([[[0.1, 0.9], [0.5, 0.5]]])
check_close(
    log_p_s(al2, torch.tensor([[1, 0]]), torch.tensor([[1.0, 0.0]])),
    torch.tensor([math.log(0.9)]),
    "log p(s|a) = log α_{1,s_1} when step 2 is padding: take α at the drawn s_t, and "
    "count only the steps where mask is True",
)


# %% check id=a2_logp_test
def calls():
    seed_everything(22)
    al = torch.randn(3, 4, 5).softmax(-1)
    s = torch.randint(0, 5, (3, 4))
    m = (torch.arange(4)[None] < torch.tensor([4, 2, 1])[:, None]).float()
    return [("log_p_s", (al, s, m), {})]


def outputs(results):
    return {"log p(s|a) with padded captions": results[0]}


# %% test id=a2_entropy_test points=1
check_close(
    entropy(torch.full((1, 1, 8), 1 / 8), torch.ones(1, 1)),
    torch.tensor([math.log(8)]),
    "H of a uniform α over 8 locations: log 8",
)
check_close(
    entropy(torch.tensor([[[1.0, 0.0]]]), torch.ones(1, 1)),
    torch.tensor([0.0]),
    "H of α = (1, 0): 0 (0 log 0 = 0, not NaN: torch.xlogy)",
)
three_steps = torch.stack(
    [
        torch.full((8,), 1 / 8),  # uniform over 8: log 8
        torch.tensor([0.5, 0.5] + [0.0] * 6),  # uniform over 2: log 2
        torch.full((8,), 1 / 8),  # padding
    ]
)[None]
check_close(
    entropy(three_steps, torch.tensor([[1.0, 1.0, 0.0]])),
    torch.tensor([math.log(8) + math.log(2)]),
    "H of 3 steps (uniform over 8, uniform over 2, padding): log 8 + log 2 (SUM the "
    "real-word steps, not their mean; the padding step must not count)",
)


# %% check id=a2_entropy_test
def calls():
    seed_everything(23)
    al = torch.randn(3, 4, 5).softmax(-1)
    al[0, 0] = torch.tensor([0.5, 0.5, 0.0, 0.0, 0.0])  # exact zeros
    m = (torch.arange(4)[None] < torch.tensor([4, 2, 1])[:, None]).float()
    return [("entropy", (al, m), {})]


def outputs(results):
    return {"H[s] with α = 0 entries and padded captions": results[0]}


# %% md
# ## 3. The moving-average baseline (1 point)
#
# Xu et al. subtract a baseline from the reward, an exponential moving average over
# mini-batches, $b_k = 0.9\, b_{k-1} + 0.1 \log p(y \mid \tilde s_k, a)$, where the
# reward is the batch's mean $\log p(y \mid \tilde s, a)$. The paper does not say what
# $b_0$ is; here the first update ($k = 1$) sets $b$ to the reward. Return $b_k$ (a
# float) from $b_{k-1}$, the number `k` of this update (1 for the first) and the reward.


# %% solution id=a2_baseline
def update_baseline(b_prev, k, reward, decay=0.9):
    """b_k = decay·b_{k−1} + (1 − decay)·reward; the first update (k = 1) sets b =
    reward."""
    ### BEGIN SOLUTION
    return float(reward) if k == 1 else decay * b_prev + (1 - decay) * float(reward)
    ### END SOLUTION


# %% test id=a2_baseline_test points=1
assert abs(update_baseline(0.0, 1, -12.0) - (-12.0)) < 1e-9, (
    "the first update sets b to the reward"
)
b2 = update_baseline(-12.0, 2, -2.0)
assert abs(b2 - (-11.0)) < 1e-9, (
    f"the second update: 0.9 · (−12) + 0.1 · (−2) = −11, got {b2}"
)
b_half = update_baseline(-12.0, 2, -2.0, decay=0.5)
assert abs(b_half - (-7.0)) < 1e-9, (
    f"with decay=0.5: 0.5 · (−12) + 0.5 · (−2) = −7, got {b_half} (use the `decay` "
    "argument, not a fixed 0.9)"
)


# %% check id=a2_baseline_test
def calls():
    seed_everything(24)
    rewards = (-20.0 + 5.0 * torch.randn(5)).tolist()  # log-likelihoods: negative
    steps = [call("update_baseline", 0.0, 1, rewards[0])]
    for k, r in enumerate(rewards[1:4], start=2):  # b_{k−1}: the previous result
        steps.append(call("update_baseline", ref(len(steps) - 1), k, r))
    steps.append(call("update_baseline", rewards[4], 5, 0.0, decay=0.5))
    return steps


def outputs(results):
    return {"b after each update": results[:4], "b with decay 0.5": results[4]}


# %% md
# ## 4. The REINFORCE surrogate (5 points)
#
# The gradient of $L_s$ is an expectation under $p(s \mid a)$; for one sampled $\tilde
# s$, with baseline $b$ and the entropy bonus,
#
# $$\frac{\partial L_s}{\partial W} \approx
#   \frac{\partial \log p(y \mid \tilde s, a)}{\partial W}
#   + \lambda_r \big(\log p(y \mid \tilde s, a) - b\big)
#   \frac{\partial \log p(\tilde s \mid a)}{\partial W}
#   + \lambda_e \frac{\partial H[\tilde s]}{\partial W}.$$
#
# Write the per-caption scalar $\ell$ `(B,)` whose gradient (by autograd) is exactly
# this: the inputs are tensors `log_py (B,)`, `log_ps (B,)`, `H (B,)` that carry
# gradients, and a number `b`. Think about which factor must not be differentiated.
# Training then minimises $-\sum \ell / \#\text{words}$.


# %% solution id=a2_surrogate
def surrogate(log_py, log_ps, H, b, lambda_r=1.0, lambda_e=0.0):
    """Per-caption ℓ `(B,)` whose gradient is the REINFORCE learning rule with baseline
    b and entropy bonus."""
    ### BEGIN SOLUTION
    return log_py + lambda_r * (log_py.detach() - b) * log_ps + lambda_e * H
    ### END SOLUTION


# %% test id=a2_surrogate_test points=2
lp_y = torch.tensor([-12.0, -7.0], requires_grad=True)
lp_s = torch.tensor([-3.0, -1.0], requires_grad=True)
Hs = torch.tensor([4.0, 2.0], requires_grad=True)
ell = surrogate(lp_y, lp_s, Hs, -10.0, lambda_r=0.5, lambda_e=0.01)
assert ell.shape == (2,), "ℓ must be one number per caption, (B,)"
ell.sum().backward()
for name, t in (("log p(y|s̃)", lp_y), ("log p(s̃|a)", lp_s), ("H", Hs)):
    assert t.grad is not None, (
        f"ℓ does not depend on {name}: every term of the learning rule must be in ℓ"
    )
check_close(
    lp_s.grad,
    torch.tensor([0.5 * (-12.0 + 10.0), 0.5 * (-7.0 + 10.0)]),
    "∂ℓ/∂log p(s̃|a) must be λ_r (log p(y|s̃) − b)",
)
check_close(
    lp_y.grad,
    torch.ones(2),
    "∂ℓ/∂log p(y|s̃) must be 1: the reward in the REINFORCE term is a constant "
    "(detach it)",
)
check_close(
    Hs.grad,
    torch.full((2,), 0.01),
    "∂ℓ/∂H must be +λ_e: ℓ is maximised, and the entropy bonus rewards spreading α",
)


# %% check id=a2_surrogate_test
def calls():
    seed_everything(25)
    lp_y = -8.0 + 4.0 * torch.randn(3)
    lp_s = -2.0 - torch.rand(3)
    Hs = 1.0 + 3.0 * torch.rand(3)
    b = float(lp_y.mean()) + float(torch.randn(()))
    return [
        leaf(lp_y),
        leaf(lp_s),
        leaf(Hs),
        call("surrogate", ref(0), ref(1), ref(2), b, lambda_r=0.5, lambda_e=0.01),
        grad(ref(3), wrt=(0, 1, 2)),  # of ℓ summed over the captions
    ]


def outputs(results):
    d_py, d_ps, d_h = results[4]
    return {
        "∂ℓ/∂log p(y|s̃) (the reward must not be differentiated in REINFORCE)": d_py,
        "∂ℓ/∂log p(s̃|a) (should be λ_r (log p(y|s̃) − b))": d_ps,
        "∂ℓ/∂H": d_h,
    }


# %% md
# **The check that decides**: on a tiny model (3 locations, captions of 3 and 2 words:
# 27 + 9 location sequences), every sequence's estimate $g(s)$ is computed with your
# `surrogate`, and its exact mean $\sum_s p(s \mid a)\, g(s)$ must equal the exact
# gradient of $-\sum L_s / \#\text{words}$, for any baseline; and a baseline near the
# mean reward must cut the estimator's variance at least in half against $b = 0$.

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
    """g(s) `(K_i, P)` and p(s|a) `(K_i,)` for every location sequence of each tiny
    image, through `surrogate`."""
    G, P = [], []
    for i in range(2):
        S = location_sequences(int(tl[i]) - 1, 3, 3)
        K = len(S)
        c, l = tc[i : i + 1].expand(K, -1), tl[i : i + 1].expand(K)
        logits, alpha, _ = tiny.rollout(tf[i : i + 1].expand(K, -1, -1), c, l, s=S)
        log_py, log_ps = (
            -word_nll(logits, c, l).sum(1),
            (alpha.gather(-1, S[..., None]).squeeze(-1).log() * target_mask(c, l)).sum(
                1
            ),
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


def exact_bound():
    """L_s = Σ_s p(s|a) log p(y|s,a) `(2,)`, every location sequence of each tiny image
    enumerated."""
    out = []
    for i in range(2):
        S = location_sequences(int(tl[i]) - 1, 3, 3)
        c, l = tc[i : i + 1].expand(len(S), -1), tl[i : i + 1].expand(len(S))
        logits, alpha, _ = tiny.rollout(tf[i : i + 1].expand(len(S), -1, -1), c, l, s=S)
        log_s = alpha.gather(-1, S[..., None]).squeeze(-1).log() * target_mask(c, l)
        out.append((log_s.sum(1).exp() * -word_nll(logits, c, l).sum(1)).sum())
    return torch.stack(out)


L_s = exact_bound()
tiny.zero_grad()
(-L_s.sum() / n_words).backward()
exact = flat_grad()
G, P = estimates(0.0)
check_close(
    sum((p[:, None] * g).sum(0) for g, p in zip(G, P)),
    exact,
    "Σ_s p(s|a) g(s) with b = 0: the estimator's exact mean must be the exact gradient",
    tol=1e-8,
)


# %% check id=a2_enumeration_test
KEPT = []  # per baseline and image: (position of its gradient step, Jacobians, p(s|a))
N_IMAGES = 2


def jacobian(y, params):
    "∂y/∂θ `(len(y), P)`: one row per element of y."
    rows = []
    for r in y:
        gs = torch.autograd.grad(r, params, retain_graph=True, allow_unused=True)
        rows.append(
            torch.cat(
                [
                    (torch.zeros_like(p) if g is None else g).reshape(-1)
                    for g, p in zip(gs, params)
                ]
            )
        )
    return torch.stack(rows)


def calls():
    """Every location sequence of a tiny model's two images: log p(y|s, a) and log p(s|a)
    (here, with their Jacobians with respect to the model's parameters); the sandbox
    calls surrogate on them and returns ∂ℓ/∂log p(y|s̃) and ∂ℓ/∂log p(s̃|a), one row per
    sequence, for three baselines. g(s) = ∂(−ℓ_s/#words)/∂θ then follows here by the
    chain rule (outputs)."""
    from sat_tutorial.hard_attention import HardAttentionCaptioner, location_sequences
    from sat_tutorial.soft_attention import target_mask, word_nll

    seed_everything(0)
    tiny = HardAttentionCaptioner(
        6, 4, embed_dim=4, hidden_dim=5, attention_dim=4, dropout=0.0
    ).double()
    with torch.no_grad():
        for p in tiny.parameters():
            p.mul_(2.0)
    tf = torch.randn(N_IMAGES, 3, 4, dtype=torch.float64) * 2
    tc, tl = torch.tensor([[1, 4, 5, 2], [1, 3, 2, 0]]), torch.tensor([4, 3])
    n_words = int((tl - 1).sum())
    params = list(tiny.parameters())
    images = []
    for i in range(N_IMAGES):
        S = location_sequences(int(tl[i]) - 1, 3, 3)
        K = len(S)
        c, l = tc[i : i + 1].expand(K, -1), tl[i : i + 1].expand(K)
        logits, alpha, _ = tiny.rollout(tf[i : i + 1].expand(K, -1, -1), c, l, s=S)
        log_py = -word_nll(logits, c, l).sum(1)
        log_ps = (
            alpha.gather(-1, S[..., None]).squeeze(-1).log() * target_mask(c, l)
        ).sum(1)
        jac = (jacobian(log_py, params), jacobian(log_ps, params))
        images.append((log_py.detach(), log_ps.detach(), jac, n_words))
    KEPT.clear()
    p_s = [lps.exp() for _, lps, _, _ in images]
    rewards = [float((p * lpy).sum()) for p, (lpy, _, _, _) in zip(p_s, images)]
    steps = []
    for b in (0.0, -5.0, sum(rewards) / len(rewards)):  # the last near the mean reward
        for (lpy, lps, jac, n), p in zip(images, p_s):
            at = len(steps)
            zero = torch.zeros(len(lpy), dtype=torch.float64)
            steps += [
                leaf(lpy),
                leaf(lps),
                call("surrogate", ref(at), ref(at + 1), zero, b, 1.0, 0.0),
                grad(ref(at + 2), wrt=(at, at + 1), each=True),
            ]
            KEPT.append((at + 3, jac, p, n))
    return steps


def outputs(results):
    """The exact mean Σ_s p(s|a) g(s) and the variance of g for each baseline, with
    g(s) = −(∂ℓ_s/∂log p(y|s) ∂log p(y|s)/∂θ + ∂ℓ_s/∂log p(s|a) ∂log p(s|a)/∂θ)/#words."""
    means, variances = [], []
    for k in range(0, len(KEPT), N_IMAGES):
        mean = var = 0.0
        for at, (j_py, j_ps), p, n in KEPT[k : k + N_IMAGES]:
            d_py, d_ps = (t.double() for t in results[at])
            g = -(d_py @ j_py + d_ps @ j_ps) / n  # (sequences, P)
            m = (p[:, None] * g).sum(0)
            mean = mean + m
            var = var + float((p[:, None] * (g - m) ** 2).sum())
        means.append(mean)
        variances.append(var)
    return {"means": means, "var_0": variances[0], "var_good": variances[-1]}


def compare(got, want):
    for k, (g, w) in enumerate(zip(got["means"], want["means"])):
        close(
            g,
            w,
            f"the estimator's exact mean (baseline {k + 1} of 3): it must be "
            "unbiased, whatever b is",
            tol=1e-8,
        )
    if not got["var_good"] < 0.5 * got["var_0"]:
        raise Mismatch(
            f"a baseline near the mean reward should cut the variance: "
            f"{got['var_good']:.3g} against {got['var_0']:.3g} with b = 0"
        )


# %% forbid
# sat_tutorial.hard_attention:sample_locations
# sat_tutorial.hard_attention:location_log_probs
# sat_tutorial.hard_attention:location_log_prob
# sat_tutorial.hard_attention:attention_entropy
# sat_tutorial.hard_attention:reinforce_surrogate
# sat_tutorial.hard_attention:HardAttentionCaptioner.update_baseline
# sat_tutorial.hard_attention:learning_rule_loss
# sat_tutorial.hard_attention_beyond:credited_surrogate
