"""Hard attention decoded by the per-step marginal over its K most probable locations
(notebook 07b, `MarginalReads(k)`): choose K on the validation scenes, then report the
test scenes with that K only.

For each hard-attention checkpoint: decode the run's own validation scenes (the ones
`fit` selected the checkpoint on) at beam 3 with every K of --ks ("all" = every
location), keep the K with the highest validation CIDEr (ties: the smaller K, which
decodes faster), then decode the 1,000 test scenes with argmax reads and with the
chosen K.

    .venv/bin/python bench/bench_marginal_k.py --threads 2 \
        bench/out/once_seed0/scenes_hard_rtg/best.pt ...

Prints a table and writes bench/out/marginal_k.json (or --out). Not run by CI.
"""

import argparse, json, os, platform, time

import torch

from sat_tutorial.hard_attention_marginal import MarginalReads
from sat_tutorial.training import (
    evaluate,
    load_checkpoint_model,
    load_records,
    transform_for,
)

from benchutil import write_json


def decode(enc, m, vocab, cfg, recs, inference, k=None):
    """BLEU-4, CIDEr, attention correctness and seconds of `recs` decoded at beam 3
    with reads `inference` ('marginal': over the top k locations)."""
    m.set_reads(MarginalReads(k) if inference == "marginal" else inference)
    t0 = time.perf_counter()
    met, _ = evaluate(
        enc,
        m,
        recs,
        transform_for(cfg),
        vocab,
        beam_size=3,
        max_len=cfg.max_len,
        meteor=False,
    )
    return {
        "bleu4": round(met["bleu4"], 4),
        "cider": round(met["cider"], 4),
        "attention_correctness": round(
            met.get("attention_correctness", float("nan")), 4
        ),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "checkpoints",
        nargs="+",
        help="best.pt files of hard-attention runs on the scenes",
    )
    ap.add_argument(
        "--ks",
        default="1,3,8,32,all",
        help="the K to try on validation, comma-separated; 'all' = every location",
    )
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    ap.add_argument("--out", default="bench/out/marginal_k.json")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    ks = [None if k == "all" else int(k) for k in args.ks.split(",")]
    rows = []
    for path in args.checkpoints:
        enc, m, vocab, cfg = load_checkpoint_model(path).model
        if cfg.model != "hard":
            ap.error(
                f"{path}: a {cfg.model!r} checkpoint; "
                "marginal decoding is for hard attention"
            )
        recs = load_records(cfg)
        val = {
            ("all" if k is None else k): decode(
                enc, m, vocab, cfg, recs["val"], "marginal", k
            )
            for k in ks
        }
        best = max(val, key=lambda k: (val[k]["cider"], -(10**9 if k == "all" else k)))
        k_best = None if best == "all" else best
        row = {
            "checkpoint": str(path),
            "seed": cfg.seed,
            "n_val": len(recs["val"]),
            "n_test": len(recs["test"]),
            "val_by_k": val,
            "chosen_k": best,
            "test_argmax": decode(enc, m, vocab, cfg, recs["test"], "argmax"),
            "test_marginal_chosen_k": decode(
                enc, m, vocab, cfg, recs["test"], "marginal", k_best
            ),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    hdr = (
        f"{'seed':>4} {'val CIDEr by K':40} {'K':>4} {'test argmax B4/CIDEr':>21} "
        f"{'test marginal B4/CIDEr':>23}"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        v = " ".join(f"{k}:{x['cider']:.1f}" for k, x in r["val_by_k"].items())
        a, b = r["test_argmax"], r["test_marginal_chosen_k"]
        print(
            f"{r['seed']:4d} {v:40} {str(r['chosen_k']):>4} "
            f"{a['bleu4']:10.2f}/{a['cider']:6.1f}    "
            f"{b['bleu4']:10.2f}/{b['cider']:6.1f}"
        )
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "threads": torch.get_num_threads(),
        "cpu": platform.processor() or platform.machine(),
        "load_avg": os.getloadavg(),
        "args": vars(args),
    }
    write_json({"meta": meta, "rows": rows}, args.out)


if __name__ == "__main__":
    main()
