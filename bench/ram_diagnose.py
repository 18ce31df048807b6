"""Issue 45 diagnostics: why RAM on 28x28 MNIST generalises badly. Short runs, 1 thread;
prints one line per evaluation.

Training set: the first --ntrain MNIST training images (55,000 or 5,000); validation:
the last 5,000 training images (never trained on); "train" error: the first 5,000
training images, measured like validation (policy means, l_0 at the centre). "ink": mean
pixel value inside each glimpse (the last number: share of policy means with |mu| >
0.9), 1,000 validation images; for --l0 random it is measured on sampled-start episodes
(training mode), for the others from the centre. Variants: --l0 random (uniform l_0 in
training episodes), --std, --lr/--bs, --linear 1 (the paper's linear f_l, no tanh).

    # 6 epochs of 55,000
    SAT_TUTORIAL_DATA=../shared/data PYTHONPATH=. python bench/ram_diagnose.py --tag
    A_base
    # 40 epochs of 5,000
    ... --ntrain 5000 --images 200000 --evals 8 --tag P_base
    ... --ntrain 5000 --images 200000 --evals 8 --tag P_l0rand --l0 random
The numbers are in bench/RESULTS_ram.md ("Issue 45").
"""

import sys, json, time, argparse, numpy as np, torch, torch.nn.functional as F

torch.set_num_threads(1)
from sat_tutorial.ram import (
    RAM,
    RAMOutput,
    GlimpseMNIST,
    load_mnist,
    ram_loss,
    integral_image,
    gaussian_log_prob,
)
from sat_tutorial.ram_training import evaluate_ram

p = argparse.ArgumentParser()
p.add_argument("--std", type=float, default=0.15)
p.add_argument("--lr", type=float, default=1e-3)
p.add_argument("--bs", type=int, default=64)
p.add_argument("--images", type=float, default=330000)
p.add_argument("--l0", default="centre")
p.add_argument("--detach", type=int, default=1)
p.add_argument("--tag", default="x")
p.add_argument("--seed", type=int, default=0)
p.add_argument("--evals", type=int, default=6)
p.add_argument("--ntrain", type=int, default=55000)
p.add_argument("--linear", type=int, default=0)
a = p.parse_args()
torch.manual_seed(a.seed)
x, y = load_mnist("train")
tr = GlimpseMNIST("mnist", images=x[: a.ntrain], labels=y[: a.ntrain])
va = GlimpseMNIST("mnist", images=x[55000:], labels=y[55000:])
trsub = GlimpseMNIST(
    "mnist", images=x[: min(5000, a.ntrain)], labels=y[: min(5000, a.ntrain)]
)


class R2(RAM):
    def forward(self, x, sample=True):
        B = x.shape[0]
        l = (
            (torch.rand(B, 2) * 2 - 1)
            if (a.l0 == "random" and self.training)
            else x.new_zeros(B, 2)
        )
        h = x.new_zeros(B, self.hidden)
        S = integral_image(x)
        log_pi, base, mus, ls = [], [], [], [l]
        for t in range(1, self.glimpses + 1):
            g_t = self.glimpse(x, l, S)
            h = F.relu(self.core_h(h) + self.core_g(g_t))
            if t == self.glimpses:
                break
            z = self.locator(h.detach() if self.detach_policy else h)
            mu = z if a.linear else torch.tanh(z)
            u = ((mu + self.std * torch.randn_like(mu)) if sample else mu).detach()
            log_pi.append(gaussian_log_prob(u, mu, self.std))
            base.append(self.baseline(h.detach())[:, 0])
            mus.append(mu)
            l = u.clamp(-1, 1)
            ls.append(l)
        return RAMOutput(
            self.classifier(h),
            torch.stack(log_pi, 1),
            torch.stack(base, 1),
            torch.stack(mus, 1),
            torch.stack(ls, 1),
        )


def ink(m):
    xv, _ = va.batch(np.arange(1000))
    with torch.no_grad():
        o = m(xv, sample=False)
    from sat_tutorial.ram import retina

    seen = torch.stack(
        [retina(xv, o.l[:, t], 8, 1).mean((1, 2, 3)) for t in range(o.l.shape[1])], 1
    )
    return [round(v, 3) for v in seen.mean(0).tolist()] + [
        round((o.mu.abs() > 0.9).float().mean().item(), 3)
    ]


m = R2(std=a.std, detach_policy=bool(a.detach))
opt = torch.optim.Adam(m.parameters(), lr=a.lr)
total = int(a.images // a.bs)
every = total // a.evals
t0 = time.time()
hist = []
rng = np.random.default_rng(a.seed)
perm = rng.permutation(a.ntrain)
pos = 0
run = []
adv = []
for step in range(1, total + 1):
    if pos + a.bs > a.ntrain:
        perm = rng.permutation(a.ntrain)
        pos = 0
    xb, yb = tr.batch(perm[pos : pos + a.bs])
    pos += a.bs
    L = ram_loss(m(xb), yb)
    opt.zero_grad()
    L["loss"].backward()
    opt.step()
    run.append(L["reward"].item())
    adv.append(L["baseline"].item())
    if step % every == 0:
        e_tr = evaluate_ram(m, trsub)["error"]
        e_va = evaluate_ram(m, va)["error"]
        hist.append(
            dict(
                step=step,
                epoch=round(step * a.bs / a.ntrain, 2),
                sec=round(time.time() - t0),
                train=round(100 * e_tr, 2),
                val=round(100 * e_va, 2),
                reward=round(float(np.mean(run)), 3),
                adv2=round(float(np.mean(adv)), 4),
                ink=ink(m),
            )
        )
        print(a.tag, hist[-1], flush=True)
        run = []
        adv = []
print(json.dumps({"args": vars(a), "hist": hist}))
