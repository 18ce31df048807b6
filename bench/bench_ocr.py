"""Attention OCR (notebook 14): recursive vs recurrent vs plain CNN feature extractors
at an equal encoder parameter budget and an equal CPU-time budget, on rendered word
images whose test words never occur in training.

    # one encoder per call
    python bench/bench_ocr.py --encoder recursive --minutes 10 --out runs/bench_ocr
    # the table of the runs done
    python bench/bench_ocr.py --table runs/bench_ocr

Each run prints and writes JSON (OUT/ENCODER/metrics.json): steps, wall seconds, word
accuracy and CER (%) on held-out words without and with the full test lexicon, attention
correctness (%), encoder and decoder parameter counts. Run the encoders one at a time:
they share the CPU budget, so parallel runs would not be equal-time.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sat_tutorial.ocr import BLOCKS, OCRConfig, WordEncoder  # noqa: E402
from sat_tutorial.ocr_training import train_ocr  # noqa: E402


def width_for_budget(kind: str, budget: int, iterations: int, feature_dim: int) -> int:
    """The channel width C (even) whose encoder has the parameter count closest to
    `budget`."""

    def count(C):
        return sum(
            p.numel()
            for p in WordEncoder(kind, C, iterations, feature_dim).parameters()
        )

    return min(range(8, 257, 2), key=lambda C: abs(count(C) - budget))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--encoder", choices=list(BLOCKS))
    p.add_argument(
        "--plain-channels",
        type=int,
        default=32,
        help="the plain CNN's width C; the others get the width of equal parameters",
    )
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--feature-dim", type=int, default=64)
    p.add_argument("--hidden-dim", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument(
        "--minutes",
        type=float,
        default=1.5,
        help="training CPU-time budget per encoder (this process)",
    )
    p.add_argument(
        "--steps",
        type=int,
        default=100000,
        help="steps at most (the time budget normally ends the run)",
    )
    p.add_argument("--n-train", type=int, default=10000)
    p.add_argument("--n-test", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("runs/bench_ocr"))
    p.add_argument(
        "--table",
        type=Path,
        help="print the table of the runs under this folder and exit",
    )
    args = p.parse_args(argv)
    if args.table:
        rows = sorted(args.table.glob("*/metrics.json"))
        print(
            "| encoder | C | encoder params | steps | CPU min | wall min | "
            "word acc | CER | word acc (lexicon) | CER (lexicon) | attention "
            "correctness |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for f in rows:
            m = json.loads(f.read_text())
            print(
                f"| {m['config']['encoder']} | {m['config']['channels']} | "
                f"{m['parameters']['encoder']:,} | {m['steps']:,} | "
                f"{m['train_cpu_seconds'] / 60:.1f} | "
                f"{m['train_wall_seconds'] / 60:.1f} | "
                f"{m['word_accuracy']:.1f} | {m['cer']:.1f} | "
                f"{m['word_accuracy_lexicon']:.1f} | "
                f"{m['cer_lexicon']:.1f} | {m['attention_correctness']:.1f} |"
            )
        return 0
    if not args.encoder:
        p.error("--encoder is required unless --table is given")
    torch.set_num_threads(1)
    budget = sum(
        q.numel()
        for q in WordEncoder(
            "plain", args.plain_channels, args.iterations, args.feature_dim
        ).parameters()
    )
    C = width_for_budget(args.encoder, budget, args.iterations, args.feature_dim)
    cfg = OCRConfig(
        encoder=args.encoder,
        channels=C,
        iterations=args.iterations,
        feature_dim=args.feature_dim,
        hidden_dim=args.hidden_dim,
        attention_dim=args.feature_dim,
        batch_size=args.batch_size,
        n_train=args.n_train,
        n_test=args.n_test,
        steps=args.steps,
        seed=args.seed,
    )
    _, m = train_ocr(
        cfg,
        args.out / args.encoder,
        time_budget=args.minutes,
        progress=False,
        overwrite=True,
    )
    keys = (
        "steps",
        "train_cpu_seconds",
        "train_wall_seconds",
        "parameters",
        "word_accuracy",
        "cer",
        "word_accuracy_lexicon",
        "cer_lexicon",
        "attention_correctness",
        "images_per_second_rendered",
    )
    print(
        json.dumps(
            {
                "encoder": args.encoder,
                "channels": C,
                "budget": budget,
                **{k: m[k] for k in keys},
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
