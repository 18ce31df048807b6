# %% md
# # A5 — DRAW: filterbank, attentive read and write, the KL term (Gregor et al. 2015)
#
# Follows notebook `04_draw`. DRAW reads and writes through an $N \times N$ grid of
# Gaussian filters whose centre, stride and width the network chooses at every step. You
# write the filterbank matrices $F_X, F_Y$, the read and the write, and the latent loss
# $\mathcal L^z$ — including its constant, which a popular implementation gets wrong.
# The grader's checks compare with `sat_tutorial.draw` on fresh inputs.
#
# **What you may use.** torch and the given `attention_params`. Write each answer
# yourself: copying code from the package (its source, its notebooks) or from anyone
# else into an answer is not allowed, whether pasted or read and executed while the
# notebook runs. While your notebook is graded, the package's implementations of what
# the parts ask for are not there: those functions raise `NotImplementedError`
# (`filterbank`, `read_glimpse`, `write_patch`, `attentive_read`, `attentive_write`,
# `kl_standard_normal` and `draw_loss`); a part that relies on them scores 0. The grader
# runs your functions on its own inputs in a separate process and compares the results
# with the solution's; the tests below only help you.
#
# Write your code between `# YOUR CODE HERE` / `raise NotImplementedError()` (delete
# both). 10 points.

# %%
import torch
from sat_tutorial.core import check_close, seed_everything
from sat_tutorial.draw import attention_params

torch.set_num_threads(1)

seed_everything(0)
A, B, N, bs = 12, 10, 3, 2  # image width A, height B, grid N×N, batch
g_X, g_Y = torch.tensor([6.0, 3.0]), torch.tensor([5.0, 7.5])
sigma2, delta, gamma = (
    torch.tensor([1.0, 0.5]),
    torch.tensor([2.0, 1.5]),
    torch.tensor([1.0, 2.0]),
)

# %% md
# ## 1. The filterbank (3 points)
#
# Filter $i = 1, \ldots, N$ of the grid is centred at $\mu_X^i = g_X + (i - N/2 -
# 0.5)\,\delta$ and $\mu_Y^j = g_Y + (j - N/2 - 0.5)\,\delta$, and
#
# $$F_X[i, a] = \frac{1}{Z_X} \exp\!\left(-\frac{(a - \mu_X^i)^2}{2\sigma^2}\right),
#   \qquad
#   F_Y[j, b] = \frac{1}{Z_Y} \exp\!\left(-\frac{(b - \mu_Y^j)^2}{2\sigma^2}\right),$$
#
# where $a = 1, \ldots, A$ and $b = 1, \ldots, B$ are pixel columns and rows **counted
# from 1**, and $Z_X, Z_Y$ make each filter (each row) sum to one over the pixels. All
# parameters are `(bs,)`; return `F_X (bs, N, A)` and `F_Y (bs, N, B)`. Normalising
# $\exp(\cdot)$ by its sum is a softmax over the pixels: compute it as one
# (`torch.softmax`), so that a narrow filter far from every pixel does not give 0/0.


# %% solution id=a5_filterbank
def filterbank(g_X, g_Y, sigma2, delta, N, A, B):
    """F_X `(bs, N, A)` and F_Y `(bs, N, B)`, each row a normalised Gaussian over the
    pixels."""
    ### BEGIN SOLUTION
    i = torch.arange(1, N + 1, dtype=g_X.dtype)
    mu_X = g_X[:, None] + (i - N / 2 - 0.5) * delta[:, None]  # (bs, N)
    mu_Y = g_Y[:, None] + (i - N / 2 - 0.5) * delta[:, None]
    a = torch.arange(1, A + 1, dtype=g_X.dtype)
    b = torch.arange(1, B + 1, dtype=g_X.dtype)
    F_X = torch.softmax(
        -((a - mu_X[..., None]) ** 2) / (2 * sigma2[:, None, None]), -1
    )  # (bs, N, A)
    F_Y = torch.softmax(
        -((b - mu_Y[..., None]) ** 2) / (2 * sigma2[:, None, None]), -1
    )  # (bs, N, B)
    return F_X, F_Y
    ### END SOLUTION


# %% test id=a5_filterbank_test points=3
import math

F_X, F_Y = filterbank(g_X, g_Y, sigma2, delta, N, A, B)
assert F_X.shape == (bs, N, A) and F_Y.shape == (bs, N, B), (
    "F_X must be (bs, N, A) and F_Y (bs, N, B)"
)
check_close(F_X.sum(-1), torch.ones(bs, N), "each filter of F_X summed over the pixels")
one = filterbank(*[torch.tensor([v]) for v in (4.0, 2.0, 0.01, 1.0)], 1, 7, 7)
assert int(one[0][0, 0].argmax()) == 3 and int(one[1][0, 0].argmax()) == 1, (
    "a single narrow filter at g_X = 4 must peak on the 4th pixel (index 3) and at "
    "g_Y = 2 on the 2nd (index 1): pixels count from 1"
)
three = filterbank(*[torch.tensor([v]) for v in (6.0, 6.0, 0.01, 2.0)], 3, 12, 12)
assert three[0][0].argmax(-1).tolist() == [3, 5, 7], (
    "three narrow filters around g_X = 6 with δ = 2 sit on pixels 4, 6, 8 (indices "
    f"3, 5, 7): μ^i = g + (i − N/2 − 0.5) δ; got {three[0][0].argmax(-1).tolist()}"
)
wide = filterbank(*[torch.tensor([v]) for v in (3.0, 3.0, 4.0, 1.0)], 1, 5, 5)[0]
by_hand = torch.tensor([math.exp(-((a - 3) ** 2) / (2 * 4.0)) for a in range(1, 6)])
check_close(
    wide[0, 0],
    by_hand / by_hand.sum(),
    "one filter at g_X = 3 with σ² = 4 over 5 pixels: exp(−(a − 3)²/(2·4)) for a = 1…5, "
    "normalised (σ² is the variance: divide by 2σ², not 2σ)",
)


# %% check id=a5_filterbank_test
def calls():
    from sat_tutorial.draw import attention_params

    seed_everything(51)
    p = attention_params(torch.randn(4, 5), 17, 13, 5)
    narrow = [torch.tensor([v]) for v in (4.0, 4.0, 0.01, 1.0)]
    return [
        ("filterbank", (*p[:4], 5, 17, 13), {}),
        ("filterbank", (*narrow, 1, 7, 7), {}),
    ]


def outputs(results):
    (F_X, F_Y), narrow = results
    return {"F_X": F_X, "F_Y": F_Y, "a narrow filter's F_X": narrow[0]}


# %% md
# ## 2. Read and write (4 points)
#
# $$\mathrm{read}(x) = \gamma\, F_Y\, x\, F_X^\top \quad (N \times N), \qquad
#   \mathrm{write}(w) = \frac{1}{\hat\gamma}\, \hat F_Y^\top\, w\, \hat F_X \quad
#   (B \times A).$$
#
# `x` is `(bs, B, A)`, `w` is `(bs, N, N)`, `gamma` is `(bs,)`.


# %% solution id=a5_readwrite
def read(x, F_X, F_Y, gamma):
    "γ F_Y x F_Xᵀ: glimpses `(bs, N, N)` of images `x (bs, B, A)`."
    ### BEGIN SOLUTION
    return gamma[:, None, None] * (F_Y @ x @ F_X.transpose(-1, -2))
    ### END SOLUTION


def write(w, F_X, F_Y, gamma):
    "(1/γ) F_Yᵀ w F_X: canvas updates `(bs, B, A)` from patches `w (bs, N, N)`."
    ### BEGIN SOLUTION
    return (F_Y.transpose(-1, -2) @ w @ F_X) / gamma[:, None, None]
    ### END SOLUTION


# %% test id=a5_read_test points=2
F_X, F_Y = (
    torch.softmax(torch.randn(bs, N, A), -1),
    torch.softmax(torch.randn(bs, N, B), -1),
)
assert read(torch.rand(bs, B, A), F_X, F_Y, gamma).shape == (bs, N, N), (
    "a read is (bs, N, N)"
)
img = torch.rand(1, 4, 4)
eye = torch.eye(4)[None]
check_close(
    read(img, eye, eye, torch.tensor([2.0])),
    2 * img,
    "read with identity filterbanks is γ·x",
)
sel_x, sel_y = torch.eye(4)[None, :2], torch.eye(4)[None, 1:3]  # columns 0–1, rows 1–2
check_close(
    read(img, sel_x, sel_y, torch.tensor([1.0])),
    img[:, 1:3, :2],
    "F_X picks columns (x) and F_Y rows (y): read = F_Y x F_Xᵀ",
)


# %% check id=a5_read_test
def calls():
    from sat_tutorial.draw import attention_params

    seed_everything(52)
    p = attention_params(torch.randn(3, 5), 11, 9, 4)
    FX = torch.softmax(torch.randn(3, 4, 11), -1)
    FY = torch.softmax(torch.randn(3, 4, 9), -1)
    return [("read", (torch.rand(3, 9, 11), FX, FY, p[4]), {})]


def outputs(results):
    return {"read(x)": results[0]}


# %% test id=a5_write_test points=2
assert write(torch.rand(bs, N, N), F_X, F_Y, gamma).shape == (bs, B, A), (
    "a write is (bs, B, A)"
)
patch = torch.rand(1, 2, 2)
check_close(
    write(patch, sel_x, sel_y, torch.tensor([2.0])),
    torch.zeros(1, 4, 4).index_put_(
        (torch.tensor([0]), torch.tensor([1, 1, 2, 2]), torch.tensor([0, 1, 0, 1])),
        patch.flatten() / 2,
    ),
    "write puts the patch back where read takes it from (F_Yᵀ w F_X), divided by γ",
)


# %% check id=a5_write_test
def calls():
    from sat_tutorial.draw import attention_params

    seed_everything(53)
    p = attention_params(torch.randn(3, 5), 11, 9, 4)
    FX = torch.softmax(torch.randn(3, 4, 11), -1)
    FY = torch.softmax(torch.randn(3, 4, 9), -1)
    return [("write", (torch.randn(3, 4, 4), FX, FY, p[4]), {})]


def outputs(results):
    return {"write(w)": results[0]}


# %% md
# ## 3. The latent loss and its constant (3 points)
#
# With $Q(Z_t \mid h^{enc}_t) = \mathcal N(\mu_t, \sigma_t^2 I)$ over $Z$ latent
# dimensions and the prior $\mathcal N(0, I)$, the latent loss is $\mathcal L^z =
# \sum_{t=1}^{T} \mathrm{KL}(Q(Z_t) \,\|\, \mathcal N(0, I))$. The paper writes it as
# $\frac12 \left(\sum_t \mu_t^2 + \sigma_t^2 - \log \sigma_t^2\right) - T/2$. Derive the
# KL of one Gaussian coordinate yourself before trusting that constant. `mu` and
# `log_sigma` are `(T, bs, Z)`; return $\mathcal L^z$ per image, `(bs,)`, in nats.


# %% solution id=a5_kl
def latent_loss(mu, log_sigma):
    "L^z = Σ_t KL(N(μ_t, σ_t²) ‖ N(0, I)) per image `(bs,)`."
    ### BEGIN SOLUTION
    T, bs, Z = mu.shape
    return 0.5 * (mu**2 + (2 * log_sigma).exp() - 2 * log_sigma).sum((0, 2)) - T * Z / 2
    ### END SOLUTION


# %% test id=a5_kl_test points=3
import math

assert latent_loss(torch.zeros(4, 2, 3), torch.zeros(4, 2, 3)).shape == (2,), (
    "L^z is one number per image"
)
check_close(
    latent_loss(torch.zeros(4, 2, 3), torch.zeros(4, 2, 3)),
    torch.zeros(2),
    "L^z when Q is the prior N(0, I): it must be 0 (count the constant −1/2 once per "
    "latent coordinate and step: −TZ/2)",
)
check_close(
    latent_loss(torch.ones(1, 1, 2), torch.zeros(1, 1, 2)),
    torch.tensor([1.0]),
    "L^z with μ = 1, σ = 1 over Z = 2 coordinates: 2 · μ²/2 = 1",
)
check_close(
    latent_loss(torch.zeros(2, 1, 1), torch.full((2, 1, 1), math.log(2.0))),
    torch.tensor([2 * (1.5 - math.log(2.0))]),
    "L^z of 2 steps with μ = 0, σ = 2 in one coordinate: each step's KL is "
    "½(σ² − log σ² − 1) = 1.5 − log 2 (σ² = exp(2 log σ)), and the steps add up",
)


# %% check id=a5_kl_test
def calls():
    seed_everything(53)
    mu, log_sigma = torch.randn(5, 3, 7), 0.3 * torch.randn(5, 3, 7)
    prior = (torch.zeros(4, 2, 3), torch.zeros(4, 2, 3))
    return [("latent_loss", (mu, log_sigma), {}), ("latent_loss", prior, {})]


def outputs(results):
    return {"L^z": results[0], "L^z when Q is the prior": results[1]}


# %% forbid
# sat_tutorial.draw:filterbank
# sat_tutorial.draw:read_glimpse
# sat_tutorial.draw:write_patch
# sat_tutorial.draw:attentive_read
# sat_tutorial.draw:attentive_write
# sat_tutorial.draw:kl_standard_normal
# sat_tutorial.draw:draw_loss
