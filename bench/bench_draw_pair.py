"""DRAW with and without attention at an equal budget: the same T, hidden size and
latent size, the same wall-clock minutes of training each, several seeds, run one after
another (interleaved by seed) on an otherwise idle machine. Reports the test NLL bound
(nats per image, all 10,000 test images) next to the paper's 80.97 (attention) and
87.40 (no attention), Gregor et al. 2015, Table 2.

    SAT_TUTORIAL_DATA=../shared/data python bench/bench_draw_pair.py \
        --T 16 --hidden 128 --z-dim 20 --read-n 2 --write-n 5 --minutes 8 --seeds 0 1

Prints a table and writes bench/out/draw_pair.json, plus each run's canvases over time
for 8 test images (bench/out/draw_pair_canvases.npz) for the figure in RESULTS.
Training goes through `sat_tutorial.draw_training.train_draw` (the Learner), in chunks of
steps until the minutes are used; the Adam state and the data order carry over between
chunks, so the chunking changes nothing but where the clock is read.
"""

import argparse, os, platform, time
from pathlib import Path

import numpy as np
import torch

from sat_tutorial.core import seed_everything
from sat_tutorial.draw import DRAW, load_binarized_mnist
from sat_tutorial.draw_training import PAPER_NLL, evaluate_draw, train_draw

from benchutil import loadavg, table, write_json

OUT = Path(__file__).resolve().parent / "out"


def run(cfg, attention, seed, train, test, minutes, lr, batch_size, chunk=50):
    "Train one variant for `minutes` of wall time; its test bound and canvases."
    seed_everything(seed)
    m = DRAW(**cfg, attention=attention, A=train.A, B=train.B)
    opt = torch.optim.Adam(m.parameters(), lr=lr)
    params = sum(p.numel() for p in m.parameters())
    losses, step = [], 0
    t0, c0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 < minutes * 60:
        losses += train_draw(
            m, train, step + chunk, batch_size, lr, seed=seed, opt=opt, start_step=step
        )
        step += chunk
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    res = evaluate_draw(m, test)
    m.eval()
    with torch.no_grad(), torch.random.fork_rng():
        torch.manual_seed(0)
        x = test.batch(torch.arange(8), "cpu")
        canv = m(x, record=True).canvases  # (T, 8, B, A), σ(c_t)
    canv = (canv * 255).round().byte()
    row = {
        "attention": attention,
        "seed": seed,
        "params": params,
        "steps": step,
        "epochs": round(step * batch_size / len(train), 2),
        "train_minutes": round(wall / 60, 2),
        "cpu_minutes": round(cpu / 60, 2),
        "last100_train_bound": round(float(np.mean(losses[-100:])), 2),
        "test_bound": round(res["nll_bound"], 2),
        "test_L_x": round(res["L_x"], 2),
        "test_L_z": round(res["L_z"], 2),
        "load_after": loadavg(),
    }
    return row, canv.numpy()


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--T", type=int, default=16, help="glimpses (the paper: 64)")
    ap.add_argument("--hidden", type=int, default=128, help="LSTM units (paper: 256)")
    ap.add_argument("--z-dim", type=int, default=20, help="latent size (paper: 100)")
    ap.add_argument("--read-n", type=int, default=2, help="read grid (paper: 2)")
    ap.add_argument("--write-n", type=int, default=5, help="write grid (paper: 5)")
    ap.add_argument("--minutes", type=float, default=8.0, help="per run, wall clock")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tag", default="draw_pair", help="name of the output files")
    ap.add_argument(
        "--variants",
        nargs="+",
        choices=("attention", "no_attention"),
        default=["attention", "no_attention"],
    )
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    train, test = load_binarized_mnist("train"), load_binarized_mnist("test")
    cfg = dict(T=a.T, hidden=a.hidden, z_dim=a.z_dim, read_n=a.read_n)
    cfg["write_n"] = a.write_n
    env = {
        "torch": torch.__version__,
        "threads": a.threads,
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "load_at_start": loadavg(),
        "data": train.source,
    }
    rows, canvases = [], {}
    for seed in a.seeds:
        for att in [v == "attention" for v in a.variants]:
            r, c = run(cfg, att, seed, train, test, a.minutes, a.lr, a.batch_size)
            rows.append(r)
            canvases[f"{'attention' if att else 'no_attention'}_seed{seed}"] = c
            print(r, flush=True)
    table(
        rows,
        ["attention", "seed", "params", "steps", "epochs", "train_minutes"]
        + ["cpu_minutes", "test_bound", "test_L_x", "test_L_z"],
    )
    for att in [v == "attention" for v in a.variants]:
        b = [r["test_bound"] for r in rows if r["attention"] == att]
        name = "attention" if att else "no_attention"
        print(
            f"{name}: mean test bound {np.mean(b):.2f} nats over {len(b)} seeds "
            f"(paper, T=64, fully trained: {PAPER_NLL[name]})"
        )
    result = {"env": env, "config": cfg, "lr": a.lr, "batch_size": a.batch_size}
    result.update(minutes=a.minutes, runs=rows, paper_nll=PAPER_NLL)
    write_json(result, OUT / f"{a.tag}.json")
    np.savez_compressed(OUT / f"{a.tag}_canvases.npz", **canvases)


if __name__ == "__main__":
    main()
