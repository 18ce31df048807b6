"""How far sampled captions are from greedy ones: the mean CIDEr-D reward of each
self-critical sampler against greedy decoding.

Self-critical training (notebook 12) raises the expected reward of the captions it
samples; test time decodes greedily with dropout off. This prints, for a trained
checkpoint, the mean training reward (CIDEr-D against the image's references, document
frequencies from all training references, as `SelfCritical` uses) of greedy captions and
of samples at each temperature, with dropout on and off, on the first N training images.

    .venv/bin/python bench/bench_scst_gap.py --checkpoint
    bench/out/flickr8k_..._run/best.pt

Writes bench/out/scst_gap_<run>.json. Not run by CI.
"""

import argparse
from pathlib import Path

import torch

from benchutil import table, write_json
from sat_tutorial.karpathy import tokenize
from sat_tutorial.decoding import greedy, sample
from sat_tutorial.metrics import CiderD
from sat_tutorial.captioner import encode
from sat_tutorial.optimization import SelfCritical
from sat_tutorial.training import load_checkpoint_model, load_records, open_features

OUT = Path(__file__).resolve().parent / "out"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--checkpoint",
        required=True,
        help="a captioner trained from stored features (bench_flickr8k.py)",
    )
    p.add_argument(
        "--images", type=int, default=1000, help="the first N training images"
    )
    p.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 0.7, 0.5])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="JSON to write")
    args = p.parse_args(argv)
    torch.manual_seed(args.seed)
    enc, model, vocab, cfg = load_checkpoint_model(args.checkpoint, "cpu").model
    recs = load_records(cfg)
    scst = SelfCritical(
        CiderD([[tokenize(x) for x in r.raw] for r in recs["train"]]),
        vocab,
        cfg.max_len,
    )
    some = recs["train"][: args.images]
    store = open_features(cfg, {"train": some})["train"]
    with torch.no_grad():
        feats = encode(
            enc.eval(), torch.stack([store.load_record(r) for r in some]), None, "cpu"
        )  # (N, L, D)
    store.close()
    refs = [[tokenize(x) for x in r.raw] for r in some]
    reward = lambda rows: round(float(scst.rewards(rows, refs).mean()), 4)
    rows = []
    with torch.no_grad():
        model.eval()
        rows.append(
            {
                "captions": "greedy (test time: dropout off, argmax reads)",
                "temperature": "",
                "reward": reward([c.tokens for c in greedy(model, feats, cfg.max_len)]),
            }
        )
        for T in args.temperatures:
            for dropout in (True, False):
                model.train(dropout)
                reads = getattr(
                    model, "recording_reads", None
                )  # hard attention samples its reads, as in SelfCritical
                with reads() if reads else torch.no_grad():
                    toks, _, _ = sample(model, feats, cfg.max_len, temperature=T)
                rows.append(
                    {
                        "captions": f"samples, dropout {'on' if dropout else 'off'}",
                        "temperature": T,
                        "reward": reward(toks.tolist()),
                    }
                )
    table(rows)
    print(
        f"(mean CIDEr-D training reward over {len(some)} training images; "
        f"{cfg.model} attention, {args.checkpoint})"
    )
    out = Path(args.out or OUT / f"scst_gap_{Path(args.checkpoint).parent.name}.json")
    write_json(
        {
            "checkpoint": str(args.checkpoint),
            "images": len(some),
            "seed": args.seed,
            "rows": rows,
        },
        out,
    )


if __name__ == "__main__":
    main()
