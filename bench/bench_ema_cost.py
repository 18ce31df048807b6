"""Cost of `--ema`: time `fit` on the scenes hard-attention preset for 120 steps, with
and without the weight average.

python bench/bench_ema_cost.py [--steps 120] [--reps 2] [--out bench/out/ema_cost.json]
"""

import argparse, tempfile, time

import torch

from sat_tutorial.fit import fit
from sat_tutorial.training import load_records, scenes_config

from benchutil import write_json


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="bench/out/ema_cost.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    base = dict(
        model="hard",
        steps=args.steps,
        n_train=2000,
        n_val=0,
        n_test=0,
        val_every=0,
        ckpt_every=0,
        seed=0,
    )
    recs = load_records(scenes_config(**base))
    res = {}
    for _ in range(args.reps):  # interleaved, so a slow spell of the machine hits both
        for ema in (0.0, 0.99):
            with tempfile.TemporaryDirectory() as d:
                t = time.perf_counter()
                fit(
                    scenes_config(**base, ema=ema),
                    d,
                    records=recs,
                    progress=False,
                    log=lambda *a: None,
                )
                res.setdefault(str(ema), []).append(time.perf_counter() - t)
    for k, v in res.items():
        print(
            f"ema={k}: {[round(x, 1) for x in v]} s for {args.steps} steps -> "
            f"{args.steps / min(v):.2f} steps/s (best)"
        )
    write_json({"steps": args.steps, "threads": args.threads, "seconds": res}, args.out)


if __name__ == "__main__":
    main()
