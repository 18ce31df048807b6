# %% md
# # A4 — Recurrent attention model: the retina and the hybrid loss (Mnih et al. 2014)
#
# Follows notebook `03_ram`. RAM never sees the whole image: at each step it takes a **glimpse** $\rho(x, l)$ — a few
# square patches centred at $l$, the larger ones averaged down to the same $g \times g$ size — and it learns where to
# look with REINFORCE. You write the retina, the Gaussian policy's log-density and the hybrid loss; the model
# (`sat_tutorial.ram.RAM`) is given. The hidden tests compare with the package's slow, obviously correct
# `retina_reference` and with `ram_loss`, values and gradients.
#
# Write your code between `# YOUR CODE HERE` / `raise NotImplementedError()` (delete both). 10 points.

# %%
import math
import torch
import torch.nn.functional as F
from sat_tutorial.core import check_close, seed_everything
from sat_tutorial.ram import (
    RAM,
    glimpse_corners,
    gaussian_log_prob as reference_log_prob,
    ram_loss,
    retina_reference,
)

torch.set_num_threads(1)

seed_everything(0)
x = torch.rand(2, 1, 28, 28)  # (B, 1, H, W) images
l = torch.tensor(
    [[0.0, 0.0], [-0.5, 0.25]]
)  # (B, 2) locations (x, y) in [-1, 1]²: (0, 0) is the centre

# %% md
# ## 1. The glimpse sensor $\rho(x, l)$ (4 points)
#
# Patch $j = 0, \ldots, k-1$ has side $g \cdot 2^j$ pixels and is centred at $l$; its top-left pixel (x, y) is
# `glimpse_corners(l, H, W, g * 2**j)` (given: centre $(l + 1)/2 \cdot (W, H)$, minus half the side, rounded).
# Pixels of a patch that fall outside the image are 0. Each patch is then averaged in blocks of $2^j \times 2^j$
# pixels down to $g \times g$. Return `(B, k, g, g)`. Any correct method is fine (loops are fine at this size).


# %% solution id=a4_retina
def retina(x, l, g=8, k=1):
    "ρ(x, l) `(B, k, g, g)`: k patches of side g·2^j centred at l, zero outside the image, block-averaged to g×g."
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
### BEGIN HIDDEN TESTS
seed_everything(41)
x2 = torch.rand(3, 1, 20, 24)
l2 = torch.tensor([[0.1, -0.2], [0.3, 0.3], [-0.25, 0.0]])  # away from the borders
check_close(
    retina(x2, l2, g=6, k=1), retina_reference(x2, l2, g=6, k=1), "ρ(x, l), one scale"
)
### END HIDDEN TESTS

# %% test id=a4_retina_scales_test points=2
r = retina(x, l, g=4, k=3)
assert r.shape == (2, 3, 4, 4), "ρ must be (B, k, g, g)"
### BEGIN HIDDEN TESTS
seed_everything(42)
x3 = torch.rand(4, 1, 28, 28)
l3 = torch.tensor(
    [[0.0, 0.0], [-1.0, -1.0], [0.95, -0.6], [1.0, 1.0]]
)  # corners: most of a big patch is outside
check_close(
    retina(x3, l3, g=5, k=3),
    retina_reference(x3, l3, g=5, k=3),
    "ρ(x, l), three scales, at the borders",
)
### END HIDDEN TESTS

# %% md
# ## 2. The location policy (1 point)
#
# The location network emits a mean $\mu_t$ and the next location is drawn from $\mathcal N(\mu_t, \sigma^2 I)$ with a
# fixed $\sigma$. REINFORCE needs $\log \pi(u \mid \mu) = \sum_{d=1}^{D} \log \mathcal N(u_d; \mu_d, \sigma^2)$, summed over
# the last dimension `(…, D)` → `(…)`.


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
### BEGIN HIDDEN TESTS
seed_everything(43)
u, mu = torch.randn(4, 3, 2), torch.randn(4, 3, 2)
check_close(
    gaussian_log_prob(u, mu, 0.15), reference_log_prob(u, mu, 0.15), "log π(u | μ)"
)
check_close(
    gaussian_log_prob(u, mu, 0.15),
    torch.distributions.Normal(mu, 0.15).log_prob(u).sum(-1),
    "log π(u | μ)",
)
### END HIDDEN TESTS

# %% md
# ## 3. The hybrid loss (5 points)
#
# `RAM(...)(x)` returns `out` with `out.logits (B, C)` (the classifier after the last glimpse), `out.log_pi (B, N−1)`
# ($\log \pi(u_t \mid s_{1:t})$ of the sampled locations), `out.baseline (B, N−1)` (the baseline $b_t$, a learned
# function of the state). The reward is $R = 1$ if the predicted class `out.logits.argmax(-1)` is `y`, else 0. The loss
# to minimise is the sum of
#
# - the classification loss: cross-entropy of `out.logits` against `y`, averaged over the batch;
# - the REINFORCE term $-\frac1B \sum_{i} \sum_t \log \pi(u^i_t)\,(R^i - b^i_t)$, where the advantage $R - b_t$ is a
#   constant (it must not send gradients anywhere);
# - the baseline's own loss: the mean squared error between $b_t$ and $R$ (this is what trains the baseline).
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
ram = RAM(
    g=4, k=2, glimpses=4, hidden=16, glimpse_hidden=8, loc_hidden=8, glimpse_dim=16
)
out = ram(x)
y = torch.tensor([3, 7])
loss = hybrid_loss(out, y)
assert loss.dim() == 0, "the loss must be a scalar"
### BEGIN HIDDEN TESTS
seed_everything(44)
ram2 = RAM(
    g=4, k=2, glimpses=4, hidden=16, glimpse_hidden=8, loc_hidden=8, glimpse_dim=16
)
x4 = torch.rand(8, 1, 28, 28)
out2 = ram2(x4)
y4 = torch.randint(0, 10, (8,))
y4[::2] = out2.logits.argmax(-1)[::2]  # some right, some wrong: rewards 1 and 0
check_close(hybrid_loss(out2, y4), ram_loss(out2, y4)["loss"], "the hybrid loss")
### END HIDDEN TESTS

# %% test id=a4_loss_grad_test points=3
loss.backward()
assert ram.baseline.weight.grad is not None, "the baseline must be trained by the loss"


### BEGIN HIDDEN TESTS
def grads(loss_fn):
    ram2.zero_grad()
    loss_fn(out2, y4).backward(retain_graph=True)
    return {
        n: (p.grad.clone() if p.grad is not None else torch.zeros_like(p))
        for n, p in ram2.named_parameters()
    }


mine, ref = grads(hybrid_loss), grads(lambda o, yy: ram_loss(o, yy)["loss"])
for n in ref:
    check_close(mine[n], ref[n], f"the gradient of the loss with respect to {n}")
### END HIDDEN TESTS
