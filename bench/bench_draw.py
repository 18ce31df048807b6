"""DRAW benchmark: training throughput with and without attention, an initialisation
ablation, and time-budgeted training runs whose test NLL bound (nats) is reported next
to the paper's 80.97 (attention) / 87.40 (no attention).

    SAT_TUTORIAL_DATA=../shared/data python bench/bench_draw.py [--minutes 4.5]
    [--threads 2] [--device auto]

Prints a table and writes bench/out/draw.json. Not run by CI.
"""

import argparse, json, os, platform, time
from pathlib import Path

import numpy as np
import torch

from sat_tutorial.core import seed_everything
from sat_tutorial.flags import get_device
from sat_tutorial.draw import DRAW, load_binarized_mnist, marginal_nll
from sat_tutorial.draw_training import PAPER_NLL, evaluate_draw, train_draw

from benchutil import write_json

PAPER = dict(
    T=64, read_n=2, write_n=5, z_dim=100, hidden=256
)  # Gregor et al. 2015, Table 3 (MNIST)
SMALL = dict(
    T=10, read_n=2, write_n=5, z_dim=10, hidden=64
)  # the notebook's small model


def throughput(cfg, attention, train, device, batch_size=64, steps=6, warmup=2):
    "Training images/s (forward + backward + Adam step)."
    seed_everything(0)
    m = DRAW(**cfg, attention=attention).to(device)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    train_draw(m, train, warmup, batch_size=batch_size, opt=opt)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    train_draw(
        m, train, warmup + steps, batch_size=batch_size, opt=opt, start_step=warmup
    )
    if device.type == "cuda":
        torch.cuda.synchronize()
    return steps * batch_size / (time.perf_counter() - t)


def timed_run(
    cfg,
    attention,
    train,
    test,
    device,
    seconds,
    lr,
    batch_size=64,
    chunk=50,
    default_init=False,
):
    """Train for about `seconds` of wall time (whole chunks of steps), then evaluate the
    test bound on all 10,000 images."""
    seed_everything(0)
    m = DRAW(**cfg, attention=attention).to(device)
    if default_init and attention:  # PyTorch's default init of the emission layers
        m.W_read_attn.reset_parameters()
        m.W_write_attn.reset_parameters()
    opt = torch.optim.Adam(m.parameters(), lr=lr)
    losses, step, t0 = [], 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        losses += train_draw(
            m,
            train,
            step + chunk,
            batch_size=batch_size,
            lr=lr,
            opt=opt,
            start_step=step,
        )
        step += chunk
    train_s = time.perf_counter() - t0
    res = evaluate_draw(m, test)
    return {
        "config": dict(cfg, attention=attention),
        "default_attention_init": default_init,
        "lr": lr,
        "batch_size": batch_size,
        "steps": step,
        "epochs": step * batch_size / len(train),
        "train_seconds": train_s,
        "final_train_bound_last100": float(np.mean(losses[-100:])),
        **{f"test_{k}": v for k, v in res.items()},
    }


def timed_steps(
    cfg, attention, train, test, device, steps, lr, default_init=False, batch_size=64
):
    seed_everything(0)
    m = DRAW(**cfg, attention=attention).to(device)
    if default_init:
        m.W_read_attn.reset_parameters()
        m.W_write_attn.reset_parameters()
    t = time.perf_counter()
    losses = train_draw(m, train, steps, batch_size=batch_size, lr=lr)
    res = evaluate_draw(m, test)
    return {
        "config": dict(cfg, attention=attention),
        "default_attention_init": default_init,
        "lr": lr,
        "steps": steps,
        "train_seconds": time.perf_counter() - t,
        "final_train_bound_last100": float(np.mean(losses[-100:])),
        **{f"test_{k}": v for k, v in res.items()},
    }


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--minutes",
        type=float,
        default=4.5,
        help="training wall time per model in the time-budgeted runs",
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (on a CPU shared with other jobs, more threads "
        "than free cores is much slower, not faster)",
    )
    ap.add_argument("--device", default="cpu")
    ap.add_argument(
        "--run-config",
        choices=("small", "medium", "paper"),
        default="small",
        help="model of the time-budgeted runs: small = the notebook's, medium = T "
        "16 / 128 units / z 20, paper = Table 3",
    )
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument(
        "--skip",
        nargs="*",
        default=[],
        choices=("throughput", "ablation", "runs"),
        help="sections to leave out (each stays as it was in the JSON); on a slow "
        "CPU run `--skip runs` and `--skip throughput ablation` separately",
    )
    ap.add_argument(
        "--out", default=str(Path(__file__).resolve().parent / "out" / "draw.json")
    )
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    device = get_device(a.device)
    train, test = load_binarized_mnist("train"), load_binarized_mnist("test")
    base = marginal_nll(train, test)
    env = {
        "device": str(device),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "load_average_1min_at_start": os.getloadavg()[0],
        "data": train.source,
    }
    out = Path(a.out)
    result = (
        json.loads(out.read_text()) if out.exists() else {}
    )  # sections run separately accumulate in one file
    result.update(
        {
            "env": env,
            "paper_nll_bound_nats": PAPER_NLL,
            "marginal_bernoulli_nll_nats": base,
        }
    )
    print(f"# DRAW benchmark on {device} ({env['threads']} threads), {train.source}")
    print(f"per-pixel Bernoulli baseline: {base:.2f} nats")

    if "throughput" not in a.skip:
        rows = []
        for name, cfg in (
            ("paper (T=64, 256 units, z=100)", PAPER),
            ("small (T=10, 64 units, z=10)", SMALL),
        ):
            for att in (True, False):
                ips = throughput(cfg, att, train, device)
                rows.append(
                    {"model": name, "attention": att, "train_images_per_s": ips}
                )
                print(
                    f"throughput  {name:32s} attention={att!s:5s}  {ips:8.1f} images/s",
                    flush=True,
                )
        result["throughput"] = rows
        result["load_average_1min_after_throughput"] = os.getloadavg()[0]

    if (
        "ablation" not in a.skip
    ):  # does the emission-bias initialisation matter? small model, 600 steps, lr 5e-3
        rows = [
            timed_steps(SMALL, True, train, test, device, 600, 5e-3, default_init=d)
            for d in (True, False)
        ]
        for r in rows:
            init = (
                "PyTorch default"
                if r["default_attention_init"]
                else "tiling bias (ours)"
            )
            print(
                "init ablation  "
                f"{init:20s} "
                " 600 steps: "
                f"test bound {r['test_nll_bound']:.2f} nats, last-100 train "
                f"{r['final_train_bound_last100']:.2f}, "
                f"{r['train_seconds']:.0f}s",
                flush=True,
            )
        result["init_ablation"] = rows
        result["load_average_1min_after_ablation"] = os.getloadavg()[0]

    if "runs" not in a.skip:
        cfg = {
            "small": SMALL,
            "medium": dict(T=16, read_n=2, write_n=5, z_dim=20, hidden=128),
            "paper": PAPER,
        }[a.run_config]
        rows = []
        for att in (True, False):
            r = timed_run(cfg, att, train, test, device, a.minutes * 60, a.lr)
            rows.append(r)
            paper = PAPER_NLL["attention" if att else "no_attention"]
            print(
                f"run  {r['config']}  {r['steps']} steps ({r['epochs']:.2f} "
                f"epochs) in {r['train_seconds'] / 60:.1f} min: "
                f"test NLL bound {r['test_nll_bound']:.2f} nats (L^x "
                f"{r['test_L_x']:.2f} + L^z {r['test_L_z']:.2f}); "
                f"paper {paper}",
                flush=True,
            )
        result["runs"] = rows
        result["load_average_1min_after_runs"] = os.getloadavg()[0]

    print("\n| what | attention | measured | paper |\n|---|---|---|---|")
    for r in result.get("throughput", []):
        print(
            f"| train images/s, {r['model']} | {r['attention']} | "
            f"{r['train_images_per_s']:.1f} | — |"
        )
    for r in result.get("init_ablation", []):
        print(
            "| test bound, small model 600 steps, "
            f"{'default' if r['default_attention_init'] else 'tiling'} "
            "attention init | True | "
            f"{r['test_nll_bound']:.2f} nats | — |"
        )
    for r in result.get("runs", []):
        c = r["config"]
        print(
            f"| test NLL bound, T={c['T']} h={c['hidden']} z={c['z_dim']}, "
            f"{r['train_seconds'] / 60:.1f} min ({r['steps']} steps) | "
            f"{c['attention']} | {r['test_nll_bound']:.2f} nats | "
            f"{PAPER_NLL['attention' if c['attention'] else 'no_attention']} "
            "(T=64) |"
        )
    print(f"| per-pixel Bernoulli (no latents) | — | {base:.2f} nats | — |")
    print()
    write_json(result, out, indent=2)


if __name__ == "__main__":
    main()
