# %% md
# # A4 — Recurrent attention model: the retina and the hybrid loss (Mnih et al. 2014)
#
# Follows notebook `03_ram`. RAM never sees the whole image: at each step it takes a
# **glimpse** $\rho(x, l)$ — a few square patches centred at $l$, the larger ones
# averaged down to the same $g \times g$ size — and it learns where to look with
# REINFORCE. You write the retina, the Gaussian policy's log-density and the hybrid
# loss; the model (`sat_tutorial.ram.RAM`) is given. The grader's checks compare with
# the instructor's solution, values and gradients.
#
# **What you may use.** torch, the given `glimpse_corners` and the model `RAM`. Write
# each answer yourself: copying code from the package (its source, its notebooks) or
# from anyone else into an answer is not allowed, whether pasted or read and executed
# while the notebook runs. While your notebook is graded, the package's implementations
# of what the parts ask for are not there: those functions raise `NotImplementedError`
# (`retina`, `retina_reference` and `ram_loss` among them; `gaussian_log_prob` stays,
# because `RAM` computes log π with it, but your code may not call it); a part that
# relies on them scores 0. The tests below build `RAM` with your retina as its sensor. The grader runs your functions on its own inputs in a separate process and
# compares the results with the solution's; the tests below only help you.
#
# Write your code between `# YOUR CODE HERE` / `raise NotImplementedError()` (delete
# both). 10 points.

# %%
import math
import torch
import torch.nn.functional as F
from sat_tutorial.core import check_close, seed_everything
from sat_tutorial.ram import RAM, glimpse_corners

torch.set_num_threads(1)

seed_everything(0)
x = torch.rand(2, 1, 28, 28)  # (B, 1, H, W) images
l = torch.tensor(
    [[0.0, 0.0], [-0.5, 0.25]]
)  # (B, 2) locations (x, y) in [-1, 1]²: (0, 0) is the centre

# %% md
# ## 1. The glimpse sensor $\rho(x, l)$ (4 points)
#
# Patch $j = 0, \ldots, k-1$ has side $g \cdot 2^j$ pixels and is centred at $l$; its
# top-left pixel (x, y) is `glimpse_corners(l, H, W, g * 2**j)` (given: centre $(l +
# 1)/2 \cdot (W, H)$, minus half the side, rounded). Pixels of a patch that fall outside
# the image are 0. Each patch is then averaged in blocks of $2^j \times 2^j$ pixels down
# to $g \times g$. Return `(B, k, g, g)`. Any correct method is fine (loops are fine at
# this size).


# %% solution id=a4_retina
def retina(x, l, g=8, k=1):
    """ρ(x, l) `(B, k, g, g)`: k patches of side g·2^j centred at l, zero outside the
    image, block-averaged to g×g."""
    ### BEGIN SOLUTION
    B, _, H, W = x.shape
    out = x.new_zeros(B, k, g, g)
    for j in range(k):
        f = 2**j
        s = g * f
        corners = glimpse_corners(l, H, W, s)  # (B, 2) top-left (x, y)
        padded = F.pad(x[:, 0], (s, s, s, s))  # zeros around: no patch leaves it
        for b in range(B):
            x0, y0 = corners[b].tolist()
            patch = padded[b, y0 + s : y0 + 2 * s, x0 + s : x0 + 2 * s]  # (s, s)
            out[b, j] = patch.reshape(g, f, g, f).mean((1, 3))
    return out
    ### END SOLUTION


# %% test id=a4_retina_test points=2
r = retina(x, l, g=4, k=1)
assert r.shape == (2, 1, 4, 4), "ρ must be (B, k, g, g)"
ramp = torch.arange(64.0).view(1, 1, 8, 8)  # pixel (x, y) holds 8y + x
centre = retina(ramp, torch.zeros(1, 2), g=2, k=1)
check_close(
    centre[0, 0],
    torch.tensor([[27.0, 28.0], [35.0, 36.0]]),
    "a 2×2 glimpse at the centre of an 8×8 ramp (pixel (x, y) = 8y + x): rows are y, "
    "columns x, the corner from glimpse_corners",
)
off_diagonal = retina(ramp, torch.tensor([[-0.5, 0.5]]), g=2, k=1)
check_close(
    off_diagonal[0, 0],
    torch.tensor([[41.0, 42.0], [49.0, 50.0]]),
    "a 2×2 glimpse at l = (x, y) = (−0.5, 0.5) of the 8×8 ramp: glimpse_corners gives "
    "the corner as (x, y) = (1, 5), so rows y = 5, 6 and columns x = 1, 2 (x and y "
    "swapped?)",
)


# %% check id=a4_retina_test
def calls():
    seed_everything(41)
    x = torch.rand(3, 1, 20, 24)
    l = (torch.rand(3, 2) - 0.5) * 0.6  # away from the borders
    return [("retina", (x, l), {"g": 6, "k": 1})]


def outputs(results):
    return {"ρ(x, l), one scale": results[0]}


# %% test id=a4_retina_scales_test points=2
r = retina(x, l, g=4, k=3)
assert r.shape == (2, 3, 4, 4), "ρ must be (B, k, g, g)"
ones = retina(torch.ones(1, 1, 8, 8), torch.zeros(1, 2), g=2, k=3)
check_close(
    ones[0, :, 0, 0],
    torch.tensor([1.0, 1.0, 1.0]),
    "on an all-ones image every scale's blocks average to 1 at the centre (average "
    "the 2^j × 2^j blocks, do not sum them)",
)
ramp_scales = retina(torch.arange(64.0).view(1, 1, 8, 8), torch.zeros(1, 2), g=2, k=3)
check_close(
    ramp_scales[0],
    torch.tensor(
        [
            [[27.0, 28.0], [35.0, 36.0]],  # 2×2 patch, blocks of 1 pixel
            [[22.5, 24.5], [38.5, 40.5]],  # 4×4 patch, 2×2 blocks
            [[13.5, 17.5], [45.5, 49.5]],  # 8×8 patch (the whole image), 4×4 blocks
        ]
    ),
    "three scales at the centre of the 8×8 ramp (pixel (x, y) = 8y + x): patch j has "
    "side 2·2^j and each output is the MEAN of its 2^j × 2^j block, which on a ramp is "
    "8·(mean y) + (mean x)",
)
corner = retina(torch.ones(1, 1, 8, 8), -torch.ones(1, 2), g=2, k=1)
check_close(
    corner[0, 0],
    torch.tensor([[0.0, 0.0], [0.0, 1.0]]),
    "a 2×2 glimpse centred on the top-left corner: the 3 pixels outside the image "
    "are 0",
)


# %% check id=a4_retina_scales_test
def calls():
    seed_everything(42)
    x = torch.rand(4, 1, 28, 28)
    l = torch.tensor([[0.0, 0.0], [-1.0, -1.0], [0.95, -0.6], [1.0, 1.0]])
    return [("retina", (x, l), {"g": 5, "k": 3})]


def outputs(results):
    return {"ρ(x, l), three scales, at the borders": results[0]}


# %% md
# ## 2. The location policy (1 point)
#
# The location network emits a mean $\mu_t$ and the next location is drawn from
# $\mathcal N(\mu_t, \sigma^2 I)$ with a fixed $\sigma$. REINFORCE needs $\log \pi(u
# \mid \mu) = \sum_{d=1}^{D} \log \mathcal N(u_d; \mu_d, \sigma^2)$, summed over the
# last dimension `(…, D)` → `(…)`.


# %% solution id=a4_logprob
def gaussian_log_prob(u, mu, std):
    "log N(u; μ, σ² I) summed over the last dimension: `(…, D)` → `(…)`."
    ### BEGIN SOLUTION
    return (
        -((u - mu) ** 2) / (2 * std**2) - math.log(std * math.sqrt(2 * math.pi))
    ).sum(-1)
    ### END SOLUTION


# %% test id=a4_logprob_test points=1
assert gaussian_log_prob(torch.zeros(3, 2), torch.zeros(3, 2), 1.0).shape == (3,), (
    "one log-density per row"
)
check_close(
    gaussian_log_prob(torch.tensor([[1.0, 0.0]]), torch.zeros(1, 2), 0.5),
    torch.tensor([-2.0 - 2 * math.log(0.5 * math.sqrt(2 * math.pi))]),
    "log N((1, 0); 0, 0.5² I) = −1/(2·0.25) − 2 log(0.5 √(2π)): divide by 2σ², and "
    "normalise with σ (a standard deviation, not a variance)",
)


# %% check id=a4_logprob_test
def calls():
    seed_everything(43)
    u, mu = torch.randn(4, 3, 2), torch.randn(4, 3, 2)
    return [("gaussian_log_prob", (u, mu, 0.15), {})]


def outputs(results):
    return {"log π(u | μ)": results[0]}


# %% md
# ## 3. The hybrid loss (5 points)
#
# `RAM(...)(x)` returns `out` with `out.logits (B, C)` (the classifier after the last
# glimpse), `out.log_pi (B, N−1)` ($\log \pi(u_t \mid s_{1:t})$ of the sampled
# locations), `out.baseline (B, N−1)` (the baseline $b_t$, a learned function of the
# state). The reward is $R = 1$ if the predicted class `out.logits.argmax(-1)` is `y`,
# else 0. The loss to minimise is the sum of
#
# - the classification loss: cross-entropy of `out.logits` against `y`, averaged over
#   the batch;
# - the REINFORCE term $-\frac1B \sum_{i} \sum_t \log \pi(u^i_t)\,(R^i - b^i_t)$, where
#   the advantage $R - b_t$ is a constant (it must not send gradients anywhere);
# - the baseline's own loss: the mean squared error between $b_t$ and $R$ (this is what
#   trains the baseline).
#
# Return the scalar loss.


# %% solution id=a4_loss
def hybrid_loss(out, y):
    "Classification + REINFORCE with baseline + baseline regression, a scalar."
    ### BEGIN SOLUTION
    R = (out.logits.argmax(-1) == y).float()  # (B,)
    action = F.cross_entropy(out.logits, y)
    advantage = (R[:, None] - out.baseline).detach()  # (B, N−1)
    reinforce = -(out.log_pi * advantage).sum(1).mean()
    baseline = F.mse_loss(out.baseline, R[:, None].expand_as(out.baseline))
    return action + reinforce + baseline
    ### END SOLUTION


# %% test id=a4_loss_value_test points=2
seed_everything(1)
# RAM reads its glimpses with your retina (the package's is absent while grading);
# it also passes the image's summed-area table S, which your retina does not need
ram = RAM(
    g=4,
    k=2,
    glimpses=4,
    hidden=16,
    glimpse_hidden=8,
    loc_hidden=8,
    glimpse_dim=16,
    sensor=lambda x, l, g, k, S: retina(x, l, g=g, k=k),
)
out = ram(x)
y = torch.tensor([3, 7])
loss = hybrid_loss(out, y)
assert loss.dim() == 0, "the loss must be a scalar"
fake = type(out)(
    *[torch.zeros_like(v) if isinstance(v, torch.Tensor) else v for v in out]
)._replace(logits=torch.tensor([[0.0, 5.0], [0.0, 5.0]]))
check_close(
    hybrid_loss(fake, torch.tensor([1, 1])),
    torch.nn.functional.cross_entropy(fake.logits, torch.tensor([1, 1])) + 1.0,
    "with log π = 0, b = 0 and both answers right (R = 1): cross-entropy + "
    "mean (b − R)² = cross-entropy + 1",
)


# %% check id=a4_loss_value_test
FIELDS = ("logits", "log_pi", "baseline", "mu")  # the outputs that carry gradients
KEPT = {}  # what calls() keeps for the comparison (on the grader's side)


def episode():
    "A small RAM, its output on a batch, and labels: some answers right, some wrong."
    from sat_tutorial.ram import RAM

    seed_everything(44)
    ram = RAM(
        g=4, k=2, glimpses=4, hidden=16, glimpse_hidden=8, loc_hidden=8, glimpse_dim=16
    )
    out = ram(torch.rand(8, 1, 28, 28))
    y = torch.randint(0, 10, (8,))
    y[::2] = out.logits.argmax(-1)[::2]  # some right, some wrong: rewards 1 and 0
    return ram, out, y


def loss_steps(out, y):
    """The RAM's output rebuilt in the sandbox, its fields with gradients as leaves
    (steps 0 … 3), then hybrid_loss on it (the last step)."""
    from sat_tutorial.ram import RAMOutput

    steps = [leaf(getattr(out, f)) for f in FIELDS]
    record = [
        ref(FIELDS.index(f)) if f in FIELDS else getattr(out, f)
        for f in RAMOutput._fields
    ]
    steps.append(build(RAMOutput, args=record))
    steps.append(call("hybrid_loss", ref(len(steps) - 1), y))
    return steps


def calls():
    _, out, y = episode()
    return loss_steps(out, y)


def outputs(results):
    return {"the hybrid loss": results[-1]}


# %% test id=a4_loss_grad_test points=3
loss.backward()
assert ram.baseline.weight.grad is not None, "the baseline must be trained by the loss"
leaf = {
    k: v.detach().requires_grad_()
    for k, v in {
        "logits": out.logits,
        "log_pi": out.log_pi,
        "baseline": out.baseline,
    }.items()
}
hybrid_loss(out._replace(**leaf), y).backward()
R = (out.logits.argmax(-1) == y).float()
check_close(
    leaf["log_pi"].grad,
    -(R[:, None] - out.baseline.detach()) / len(y),
    "∂loss/∂log π_t = −(R − b_t)/B: sum over the steps, mean over the batch",
)
check_close(
    leaf["baseline"].grad,
    2 * (out.baseline.detach() - R[:, None]) / out.baseline.numel(),
    "∂loss/∂b_t: only the baseline's MSE may reach b (detach the advantage R − b_t)",
)


# %% check id=a4_loss_grad_test
FIELDS = ("logits", "log_pi", "baseline", "mu")  # the outputs that carry gradients
KEPT = {}  # what calls() keeps for the comparison (on the grader's side)


def episode():
    "A small RAM, its output on a batch, and labels: some answers right, some wrong."
    from sat_tutorial.ram import RAM

    seed_everything(44)
    ram = RAM(
        g=4, k=2, glimpses=4, hidden=16, glimpse_hidden=8, loc_hidden=8, glimpse_dim=16
    )
    out = ram(torch.rand(8, 1, 28, 28))
    y = torch.randint(0, 10, (8,))
    y[::2] = out.logits.argmax(-1)[::2]  # some right, some wrong: rewards 1 and 0
    return ram, out, y


def loss_steps(out, y):
    """The RAM's output rebuilt in the sandbox, its fields with gradients as leaves
    (steps 0 … 3), then hybrid_loss on it (the last step)."""
    from sat_tutorial.ram import RAMOutput

    steps = [leaf(getattr(out, f)) for f in FIELDS]
    record = [
        ref(FIELDS.index(f)) if f in FIELDS else getattr(out, f)
        for f in RAMOutput._fields
    ]
    steps.append(build(RAMOutput, args=record))
    steps.append(call("hybrid_loss", ref(len(steps) - 1), y))
    return steps


def calls():
    """The loss's gradient with respect to the output's fields (in the sandbox); the
    parameters' gradients follow here by the chain rule, through the Jacobian of the
    fields with respect to the parameters (kept)."""
    ram, out, y = episode()
    params = dict(ram.named_parameters())
    rows = []
    for r in torch.cat([getattr(out, f).reshape(-1) for f in FIELDS]):
        gs = torch.autograd.grad(
            r, list(params.values()), retain_graph=True, allow_unused=True
        )
        rows.append(
            torch.cat(
                [
                    (torch.zeros_like(p) if g is None else g).reshape(-1)
                    for g, p in zip(gs, params.values())
                ]
            )
        )
    KEPT["jacobian"] = torch.stack(rows)  # (field elements, parameters)
    KEPT["shapes"] = {n: p.shape for n, p in params.items()}
    steps = loss_steps(out, y)
    steps.append(grad(ref(len(steps) - 1), wrt=range(len(FIELDS))))
    return steps


def outputs(results):
    by_field = torch.cat([g.reshape(-1).double() for g in results[-1]])
    flat = by_field @ KEPT["jacobian"].double()
    out, at = {}, 0
    for n, shape in KEPT["shapes"].items():
        size = shape.numel()
        out[f"the gradient of the loss with respect to {n}"] = flat[
            at : at + size
        ].reshape(shape)
        at += size
    return out


# %% forbid
# sat_tutorial.ram:retina
# sat_tutorial.ram:retina_reference
# sat_tutorial.ram:gaussian_log_prob
# sat_tutorial.ram:reinforce_samples
# sat_tutorial.ram:ram_loss
