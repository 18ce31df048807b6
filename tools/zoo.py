"""Build the model zoo that ships inside the package (`sat_tutorial/zoo/`): each model
is trained by the package's own command, packed (weights only, float16 where the slice
metric does not move) and entered in `sat_tutorial/zoo/manifest.json` with its command,
minutes, threads, the metrics its evaluation printed, its slice metric, bytes and
SHA-256.

    python tools/zoo.py build                 # every model, one after another
    python tools/zoo.py build soft-scenes     # one (or several) by name
    python tools/zoo.py train soft-scenes     # only the training run, into zoo_runs/
    python tools/zoo.py pack soft-scenes      # only pack zoo_runs/NAME and enter it
    python tools/zoo.py list                  # the recipes
    python tools/zoo.py table                 # the manifest as bench/RESULTS.md's table
    python tools/zoo.py curves draw-mnist     # enter a run's learning curve only

`make weights` runs `build`, `make weights NAME=soft-scenes` builds one. Retrain a model
only when its code changes: every build adds its weights to git's history.
Runs go one after another on one thread (two trainings side by side on two cores slow
each other several-fold). The runs' folders are kept under zoo_runs/ (git ignores it).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "zoo_runs"
THREADS = 1

# name: (kind, paper, data, the command after `sat-tutorial`, the run file to ship,
#        the file holding the metrics the run's evaluation printed)
SCENES = "the built-in synthetic scenes (notebook 02), 8,000 training scenes"
SAT = "Xu et al. 2015, Show, Attend and Tell"
# Flickr8k's photos through EfficientNet-Lite0 (the `lite` extra), made by the recipe
FLICKR8K_FEATURES = "zoo_runs/flickr8k_efficientnet-lite0.h5"


def _scenes(model: str, steps: int = 1100) -> list[str]:
    return f"train --model {model} --steps {steps} --evaluate --seed 0".split()


RECIPES = {
    "soft-scenes": (
        "captioner",
        SAT + " (soft)",
        SCENES,
        _scenes("soft"),
        "best.pt",
        "test_metrics.json",
    ),
    "hard-scenes": (
        "captioner",
        SAT + " (hard)",
        SCENES,
        _scenes("hard"),
        "best.pt",
        "test_metrics.json",
    ),
    "adaptive-scenes": (
        "captioner",
        "Lu et al. 2017, Knowing When to Look",
        SCENES,
        _scenes("adaptive", steps=2000),
        "best.pt",
        "test_metrics.json",
    ),
    "butd-scenes": (
        "captioner",
        "Anderson et al. 2018, Bottom-Up and Top-Down",
        SCENES,
        _scenes("butd"),
        "best.pt",
        "test_metrics.json",
    ),
    "transformer-scenes": (
        "captioner",
        "Vaswani et al. 2017, Attention Is All You Need",
        SCENES,
        _scenes("transformer"),
        "best.pt",
        "test_metrics.json",
    ),
    "ocr-words": (
        "ocr",
        "Lee & Osindero 2016, Recursive Recurrent Nets with "
        "Attention Modeling for OCR in the Wild",
        "the built-in rendered words (notebook 14b)",
        "ocr train --time-budget 12 --seed 0".split(),
        "ocr.pt",
        "metrics.json",
    ),
    "draw-mnist": (
        "draw",
        "Gregor et al. 2015, DRAW (with attention)",
        "binarized MNIST (Larochelle & Murray)",
        (
            "draw train --attention -T 16 --hidden 256 --z-dim 20 --read-n 5 "
            "--write-n 5 --lr 3e-3 --batch-size 64 --binarization fixed "
            "--time-budget 8 --seed 0"
        ).split(),
        "checkpoint.pt",
        "metrics.json",
    ),
    "draw-mnist-plain": (
        "draw",
        "Gregor et al. 2015, DRAW (without attention)",
        "binarized MNIST (Larochelle & Murray)",
        (
            "draw train --no-attention -T 16 --hidden 256 --z-dim 20 "
            "--lr 3e-3 --batch-size 64 --binarization fixed "
            "--time-budget 8 --seed 0"
        ).split(),
        "checkpoint.pt",
        "metrics.json",
    ),
    "ram-mnist": (
        "ram",
        "Mnih et al. 2014, Recurrent Models of Visual Attention",
        "MNIST 28×28",
        "ram train --task mnist --time-budget 15 --seed 0".split(),
        "best.pt",
        "metrics.json",
    ),
    "ram-translated": (
        "ram",
        "Mnih et al. 2014, Recurrent Models of Visual Attention",
        "MNIST digits placed at random in 60×60",
        "ram train --task translated --time-budget 15 --seed 0".split(),
        "best.pt",
        "metrics.json",
    ),
    "soft-flickr8k": (
        "captioner",
        SAT + " (soft)",
        "Flickr8k (Karpathy split), EfficientNet-Lite0 7×7 features",
        (
            f"train --data flickr8k --features {FLICKR8K_FEATURES} "
            "--encoder efficientnet-lite0 --encoder-weights DEFAULT --grid 7 "
            "--batch-size 64 --warmup 200 --epochs 1000 --patience 6 "
            "--length-pool 50 --time-budget 50 --evaluate --seed 0"
        ).split()
        + ["--model-kwargs", '{"alpha_c": 1.0}'],
        "best.pt",
        "test_metrics.json",
    ),
}

# models packed with their large matrices in int8 rows (the zoo's 40 MB budget)
INT8 = {"soft-flickr8k"}

# commands a recipe runs first, as typed (their minutes count in the model's)
PREPARE = {
    "soft-flickr8k": [
        (
            "sat-tutorial extract-features --data flickr8k --encoder "
            f"efficientnet-lite0 --batch-size 32 --workers 1 --out {FLICKR8K_FEATURES}"
        ).split()
    ],
}


def command(name: str) -> list[str]:
    "The whole command of a recipe, as a user would type it."
    out = RUNS / name
    return [
        "sat-tutorial",
        *RECIPES[name][3],
        "--threads",
        str(THREADS),
        "--out",
        str(out.relative_to(ROOT)),
    ]


def train(name: str) -> dict:
    "Run a recipe's command into zoo_runs/NAME (a new run); returns its minutes."
    out = RUNS / name
    argv = command(name)
    exe = Path(sys.executable).parent / "sat-tutorial"
    env = {**os.environ, "OMP_NUM_THREADS": str(THREADS), "MPLBACKEND": "Agg"}
    if out.exists() and any(out.iterdir()):
        argv.append("--overwrite")
    RUNS.mkdir(exist_ok=True)
    t0 = time.time()
    with open(RUNS / f"{name}.log", "w") as log:
        for step in [*PREPARE.get(name, []), argv]:
            print("$", shlex.join(step), flush=True)
            rc = subprocess.call(
                [str(exe), *step[1:]],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            if rc != 0:
                sys.exit(
                    f"{name}: {step[1]} exited with {rc}; see {RUNS / (name + '.log')}"
                )
            log.flush()
    minutes = (time.time() - t0) / 60
    commands = [*PREPARE.get(name, []), [a for a in argv if a != "--overwrite"]]
    info = {
        "command": " && ".join(shlex.join(c) for c in commands),
        "minutes": round(minutes, 1),
        "threads": THREADS,
    }
    (out / "zoo_run.json").write_text(json.dumps(info, indent=1))
    print(f"{name}: {minutes:.1f} min", flush=True)
    return info


def curve(name: str, points: int = 40) -> dict | None:
    """A run's learning curve, small enough for the manifest: DRAW's training bound
    (mean per 1/40 of the run), RAM's validation error per epoch; minutes at step s
    taken as s / steps × the run's minutes (None for the other kinds)."""
    import numpy as np
    import torch

    kind, out = RECIPES[name][0], RUNS / name
    if kind == "draw":
        ck = torch.load(out / "checkpoint.pt", map_location="cpu", weights_only=True)
        loss, minutes = np.asarray(ck["losses"]), float(ck["minutes"])
        bins = np.array_split(np.arange(len(loss)), points)
        return {
            "minutes": [round((b[-1] + 1) / len(loss) * minutes, 3) for b in bins],
            "train_bound": [round(float(loss[b].mean()), 2) for b in bins],
        }
    if kind == "ram":
        m = json.loads((out / "metrics.json").read_text())
        per_step = m["train_seconds"] / 60 / m["step"]
        evals = [e for e in m["evals"] if e["on"] == "validation"]
        return {
            "minutes": [round(e["step"] * per_step, 3) for e in evals],
            "val_error": [e["error"] for e in evals],
        }
    return None


def add_curves(names) -> None:
    "Enter each run's curve in its manifest entry (the weights and their hash stay)."
    from sat_tutorial import pretrained
    from sat_tutorial.zoo import ZOO_DIR, zoo_manifest

    for e in zoo_manifest():
        if e["name"] in names and (c := curve(e["name"])):
            pretrained._write_manifest(ZOO_DIR, {**e, "curve": c})
            print(f"{e['name']}: curve of {len(c['minutes'])} points", flush=True)


def pack(name: str) -> dict:
    "Pack zoo_runs/NAME into the package and enter it in the manifest."
    from sat_tutorial import pretrained

    kind, paper, data, _, run_file, metrics_file = RECIPES[name]
    out = RUNS / name
    info = json.loads((out / "zoo_run.json").read_text())
    metrics = json.loads((out / metrics_file).read_text())
    entry = pretrained.pack_run(
        out / run_file,
        name,
        kind=kind,
        paper=paper,
        data=data,
        metrics=metrics,
        int8=name in INT8,
        **info,
        **({"curve": c} if (c := curve(name)) else {}),
    )
    print(json.dumps(entry, indent=1), flush=True)
    return entry


TARGETS = {  # issue 58's bar for each model, and the paper's number where it has one
    "soft-scenes": ("BLEU-4 ≥ 91, correctness ≥ 0.64", "—"),
    "hard-scenes": ("—", "—"),
    "adaptive-scenes": ("BLEU-4 ≥ 88, correctness ≥ 0.72", "—"),
    "butd-scenes": ("BLEU-4 ≥ 87, correctness ≥ 0.72", "—"),
    "transformer-scenes": ("BLEU-4 ≥ 86", "—"),
    "ocr-words": ("≥ 90 % of words, no lexicon", "— (real scene text)"),
    "draw-mnist": ("below draw-mnist-plain", "80.97 (T = 64)"),
    "draw-mnist-plain": ("above draw-mnist", "87.40 (T = 64)"),
    "ram-mnist": ("≤ 1.5 %", "1.29 %"),
    "ram-translated": ("≤ 3 %", "1.84 %"),
    "soft-flickr8k": ("BLEU-4 ≥ 19.5 (Karpathy test, beam 3)", "19.5 (VGG-19)"),
}


def _metric(e: dict) -> str:
    m = e["metrics"]
    if e["kind"] == "captioner" and "attention_correctness" not in m:  # photos
        return f"BLEU-4 {m['bleu4']:.2f}, METEOR {m['meteor']:.2f}"
    if e["kind"] == "captioner":
        return f"BLEU-4 {m['bleu4']:.2f}, correctness {m['attention_correctness']:.3f}"
    if e["kind"] == "ocr":
        return (
            f"{m['word_accuracy']:.1f} % of words ({m['word_accuracy_lexicon']:.1f} % "
            f"with the lexicon), CER {m['cer']:.1f} %"
        )
    if e["kind"] == "draw":
        return f"NLL bound {m['test_nll_bound_nats']:.2f} nats"
    return f"test error {100 * m['test_error']:.2f} %"


def table() -> str:
    "The zoo as a markdown table, from the manifest."
    from sat_tutorial.runs import zoo_manifest

    rows = [
        "| model | metric | target | paper | slice (200) | minutes (threads) | bytes | "
        "command |",
        "|---|---|---|---|---|---|---|---|",
    ]
    entries = zoo_manifest()
    for e in entries:
        target, paper = TARGETS.get(e["name"], ("—", "—"))
        sl = ", ".join(f"{k} {v}" for k, v in e["slice"].items() if k != "items")
        rows.append(
            f"| `{e['name']}` | {_metric(e)} | {target} | {paper} | {sl} | "
            f"{e['minutes']} ({e['threads']}) | {e['bytes']:,} ({e['dtype']}) | "
            f"`{e['command']}` |"
        )
    total = sum(e["bytes"] for e in entries) / 1e6
    return "\n".join(rows) + f"\n\n{len(entries)} models, {total:.1f} MB in all."


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "action", choices=["build", "train", "pack", "list", "table", "curves"]
    )
    ap.add_argument("names", nargs="*", help="recipes (default: all)")
    args = ap.parse_args(argv)
    names = args.names or list(RECIPES)
    unknown = [n for n in names if n not in RECIPES]
    if unknown:
        ap.error(f"unknown model {', '.join(unknown)}; known: {', '.join(RECIPES)}")
    if args.action == "table":
        print(table())
        return 0
    if args.action == "curves":  # the learning curves of the runs in zoo_runs/
        add_curves(names)
        return 0
    for n in names:
        if args.action == "list":
            steps = [*PREPARE.get(n, []), command(n)]
            print(f"{n:20} {' && '.join(shlex.join(c) for c in steps)}")
        if args.action in ("build", "train"):
            train(n)
        if args.action in ("build", "pack"):
            pack(n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
