"""How far one optimiser step moves the weights: every family's short run at its default
learning rate, at 1,000 times it and at 10 (the upper bound of every --lr flag), with the
largest factor by which one step multiplied the norm of the weights the optimiser
updates. It is the measurement behind
the Learner's rule that a step multiplying that norm by more than ten is an exploding
update, which stops the run like a non-finite loss (notebook 12c, `Diverged`).

    python bench/divergence_rule.py            # prints a table, writes the JSON
    python bench/divergence_rule.py --json bench/divergence_rule.json
"""

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from sat_tutorial import cli, learner

RUNS = {  # family → (command line without --out and --lr, its default rate)
    "soft": (["train", "--model", "soft", "--data", "scenes", "--steps", "60"], 2e-3),
    "hard": (["train", "--model", "hard", "--data", "scenes", "--steps", "60"], 4e-3),
    "ram": (["ram", "train", "--steps", "100", "--limit", "2000", "--quiet"], 1e-3),
    "draw": (
        [
            "draw",
            "train",
            "--steps",
            "60",
            "-T",
            "4",
            "--hidden",
            "64",
            "--z-dim",
            "10",
        ],
        1e-3,
    ),
    "ocr": (
        [
            "ocr",
            "train",
            "--steps",
            "60",
            "--n-train",
            "600",
            "--n-test",
            "50",
            "--channels",
            "16",
            "--quiet",
        ],
        1e-3,
    ),
}


def weights_norm(opt) -> float:
    params = [p for g in opt.param_groups for p in g["params"]]
    return float(
        torch.linalg.vector_norm(torch.stack([p.detach().norm() for p in params]))
    )


def measure(argv: list, out: Path) -> dict:
    ratios, plain = [], learner.Learner.opt_step

    def opt_step(self):
        before = weights_norm(self.opt)
        plain(self)
        ratios.append(weights_norm(self.opt) / before)

    learner.Learner.opt_step = opt_step
    t0, buf = time.perf_counter(), io.StringIO()
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            try:
                code = cli.main([*argv, "--out", str(out)])
            except SystemExit as e:  # a flag refused
                code = e.code
    finally:
        learner.Learner.opt_step = plain
    last = [ln for ln in buf.getvalue().splitlines() if ln.strip()][-1:] or [""]
    big = max(ratios) if ratios else float("nan")
    return {
        "steps": len(ratios),
        "max_ratio": big,
        "at_step": ratios.index(big) + 1 if ratios else None,
        "exit": code,
        "seconds": round(time.perf_counter() - t0, 1),
        "last_line": last[0][:120],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default="bench/divergence_rule.json")
    ap.add_argument("--only", nargs="*", default=list(RUNS))
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for fam in a.only:
            args, lr = RUNS[fam]
            for rate in (lr, lr * 1e3, 10.0):
                r = measure([*args, "--lr", f"{rate:g}"], Path(tmp) / f"{fam}{rate:g}")
                rows.append({"family": fam, "lr": rate, **r})
                print(
                    f"{fam:5} lr {rate:8.3g}  steps {r['steps']:4}  "
                    f"max |w| ratio {r['max_ratio']:10.5g} at step {r['at_step']}  "
                    f"exit {r['exit']}  {r['seconds']:6.1f} s  {r['last_line']}",
                    flush=True,
                )
    Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
