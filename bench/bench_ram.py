"""RAM benchmarks: training images/s with the vectorised retina vs the per-image
Python-loop reference retina, and training runs "as far as this CPU allows" next to the
paper's test errors.

    python bench/bench_ram.py throughput                     # ~2 minutes
    python bench/bench_ram.py train --task mnist --minutes 10
    python bench/bench_ram.py train --task translated --minutes 10
    # detach_policy True vs False, same budget
    python bench/bench_ram.py routing --minutes 2

Each part prints a table and merges its results into bench/out/ram.json. Needs MNIST in
$SAT_TUTORIAL_DATA/mnist/raw (../shared/data is used when it exists).
"""

import argparse, json, os, platform, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_shared = ROOT.parent / "shared" / "data"
if "SAT_TUTORIAL_DATA" not in os.environ and _shared.is_dir():
    os.environ["SAT_TUTORIAL_DATA"] = str(_shared)

import numpy as np
import torch

from benchutil import table  # noqa: E402

from sat_tutorial.ram import (
    TASKS,
    TEST_SEED,
    GlimpseMNIST,
    ram_loss,
    retina,
    retina_reference,
)
from sat_tutorial.ram_training import RAMConfig, evaluate_ram, train_ram

OUT = ROOT / "bench" / "out" / "ram.json"
# The paper's test errors (%), the range over the two published versions of the paper.
PAPER = {
    "mnist": "1.12-1.29 (6 glimpses, 8x8, 1 scale)",
    "translated": "1.20-1.84 (8 glimpses, 12x12, 3 scales)",
    "cluttered60": "4.04-5.23 (8 glimpses, 12x12, 3 scales)",
    "cluttered100": "not quoted here",
}


def merge(key, value):
    OUT.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(OUT.read_text()) if OUT.exists() else {}
    data[key] = value
    data["machine"] = {
        "platform": platform.platform(),
        "processor": platform.processor(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
    }
    OUT.write_text(json.dumps(data, indent=1))


def throughput(args):
    """Training images/s, same model, same batches, same initial weights; only the
    retina differs. Runs alternate to share load noise."""
    rows = []
    for task in args.tasks:
        cfg = RAMConfig(task=task, batch_size=args.batch_size)
        data = GlimpseMNIST(task, "train", seed=0, limit=args.batch_size * 8)
        batches = [
            data.batch(np.arange(i * args.batch_size, (i + 1) * args.batch_size))
            for i in range(8)
        ]
        models = {}
        for name, sensor in (("vectorised", retina), ("reference", retina_reference)):
            torch.manual_seed(0)
            m = cfg.model(sensor)
            models[name] = (m, torch.optim.Adam(m.parameters(), lr=cfg.lr))
        seconds = {k: 0.0 for k in models}

        def run(name, n):
            m, opt = models[name]
            t = time.perf_counter()
            for i in range(n):
                x, y = batches[i % len(batches)]
                L = ram_loss(m(x), y)
                opt.zero_grad()
                L["loss"].backward()
                opt.step()
            return time.perf_counter() - t

        for name in models:
            run(name, 2)  # warm-up
        for _ in range(args.rounds):
            for name in models:
                seconds[name] += run(name, args.steps)
        n_img = args.rounds * args.steps * args.batch_size
        ips = {k: n_img / v for k, v in seconds.items()}
        rows.append(
            {
                "task": task,
                "glimpses": cfg.glimpses,
                "retina g×k": f"{cfg.patch}x{cfg.scales}",
                "batch": args.batch_size,
                "vectorised img/s": round(ips["vectorised"], 1),
                "reference img/s": round(ips["reference"], 1),
                "speed-up": round(ips["vectorised"] / ips["reference"], 2),
            }
        )
        print(f"{task}: {rows[-1]}", flush=True)
    print()
    table(rows, list(rows[0]))
    merge(
        "throughput",
        {"rows": rows, "steps_per_round": args.steps, "rounds": args.rounds},
    )


def train(args):
    """Train for about `minutes` on this CPU (steps set from a measured rate so the
    learning rate can anneal to 0), test on the full test set."""
    cfg_kw = dict(
        task=args.task,
        batch_size=args.batch_size,
        lr=args.lr,
        seed=args.seed,
        anneal=args.anneal,
        std=args.std,
    )
    # measure the rate on a short run, then size the real run to the time budget
    _, probe = train_ram(
        RAMConfig(**cfg_kw, steps=100),
        test_data=GlimpseMNIST(args.task, "test", seed=TEST_SEED, limit=100),
    )
    rate = (
        100 / probe["train_seconds"]
    )  # training steps per second, evaluation excluded
    n_train = 60000
    per_epoch = n_train // args.batch_size
    eval_s = (
        10000 / (rate * args.batch_size) * 0.5
    )  # rough: an evaluation pass costs about half a training pass per image
    budget = args.minutes * 60
    steps = int(rate * budget / (1 + eval_s * rate / per_epoch) * 0.92)
    cfg = RAMConfig(**cfg_kw, steps=steps)
    print(
        f"{args.task}: {rate:.1f} steps/s measured -> {steps} steps "
        f"({steps / per_epoch:.1f} epochs) of {args.batch_size}",
        flush=True,
    )
    t = time.perf_counter()
    model, m = train_ram(
        cfg,
        out=ROOT / "bench" / "out" / f"ram_{args.task}",
        progress=args.progress,
        time_budget=args.minutes,
        overwrite=True,
    )
    wall = time.perf_counter() - t
    ev_mc = (
        evaluate_ram(
            model,
            GlimpseMNIST(args.task, "test", seed=TEST_SEED),
            mc_samples=args.mc_samples,
        )
        if args.mc_samples
        else None
    )
    row = {
        "task": args.task,
        "glimpses": cfg.glimpses,
        "retina g×k": f"{cfg.patch}x{cfg.scales}",
        "steps": m["step"],
        "epochs": round(m["step"] / per_epoch, 2),
        "batch": args.batch_size,
        "wall min": round(wall / 60, 1),
        "test error %": round(100 * m["test_error"], 2),
        **(
            {
                f"test error % (MC {args.mc_samples}, not in paper)": round(
                    100 * ev_mc["error"], 2
                )
            }
            if ev_mc
            else {}
        ),
        "paper %": PAPER[args.task],
    }
    print()
    table([row], list(row))
    merge(
        f"train_{args.task}",
        {
            **row,
            "config": m["config"],
            "evals": m["evals"],
            "history": m["history"][-5:],
            "threads": torch.get_num_threads(),
        },
    )


def routing(args):
    """Same budget of steps, two gradient routings: REINFORCE stops at h_t (default) vs
    the paper's full gradient."""
    rows = []
    for seed in args.seeds:
        for detach in (True, False):
            cfg = RAMConfig(
                task="mnist",
                steps=args.steps,
                batch_size=64,
                seed=seed,
                detach_policy=detach,
            )
            t = time.perf_counter()
            _, m = train_ram(
                cfg, test_data=GlimpseMNIST("mnist", "test", seed=TEST_SEED, limit=5000)
            )
            rows.append(
                {
                    "seed": seed,
                    "detach_policy": detach,
                    "steps": args.steps,
                    "test error % (5k)": round(100 * m["test_error"], 2),
                    "seconds": round(time.perf_counter() - t),
                }
            )
            print(rows[-1], flush=True)
    print()
    table(rows, list(rows[0]))
    merge("routing", rows)


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (default: 1)"
    )
    sub = p.add_subparsers(dest="part", required=True)
    t = sub.add_parser("throughput")
    t.add_argument(
        "--tasks",
        nargs="+",
        default=["mnist", "translated", "cluttered100"],
        choices=list(TASKS),
    )
    t.add_argument("--batch-size", type=int, default=64)
    t.add_argument("--steps", type=int, default=10)
    t.add_argument("--rounds", type=int, default=3)
    t.set_defaults(func=throughput)
    r = sub.add_parser("train")
    r.add_argument("--task", choices=list(TASKS), default="mnist")
    r.add_argument("--minutes", type=float, default=10)
    r.add_argument("--batch-size", type=int, default=64)
    r.add_argument("--lr", type=float, default=1e-3)
    r.add_argument("--std", type=float, default=0.15)
    r.add_argument("--no-anneal", dest="anneal", action="store_false")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument(
        "--mc-samples",
        type=int,
        default=0,
        help="also report test error averaged over K sampled episodes (not in the "
        "paper)",
    )
    r.add_argument("--progress", action="store_true")
    r.set_defaults(func=train)
    g = sub.add_parser("routing")
    g.add_argument("--steps", type=int, default=1500)
    g.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    g.set_defaults(func=routing)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
