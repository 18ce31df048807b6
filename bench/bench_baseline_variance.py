"""How much of the REINFORCE reward each hard-attention baseline removes, on real
captions.

For a trained hard-attention checkpoint (its training weights, not their average, where
it has both), every caption of N training (or validation) images is read once with
sampled locations, in training mode (dropout on, as in a training step), and its reward
log p(y | s̃, a) — per caption (G_0) and, for a model trained with reward-to-go credit,
per word from each step on (G_t) — is compared with the two baselines of notebook 07:
the moving average b stored in the checkpoint (per caption; with reward-to-go, per word
× the words from step t on), and the caption's log-likelihood under the expected context
Σ α a (`baseline_kind="expected"`). The REINFORCE term's variance grows with E[(G −
b)²]; the table prints its root and the correlation of each baseline with the reward.

    python bench/bench_baseline_variance.py --checkpoint bench/out/<run>/val_step4000.pt
    --images 1000
"""

from __future__ import annotations
import argparse
from pathlib import Path

import torch

from sat_tutorial.data import pad_captions
from sat_tutorial.hard_attention_beyond import (
    ExtendedHardAttentionCaptioner,
    rewards_to_go,
)
from sat_tutorial.soft_attention import target_mask, word_nll
from sat_tutorial.checkpoints import load_checkpoint
from sat_tutorial.training import load_checkpoint_model, load_records, open_features

from benchutil import write_json


def stats(adv: torch.Tensor, reward: torch.Tensor, base: torch.Tensor) -> dict:
    """Root mean square of the advantage G − b, its mean, and the correlation of b with
    G (over the entries given)."""
    corr = (
        torch.corrcoef(torch.stack([reward, base]))[0, 1]
        if base.std() > 0
        else torch.tensor(float("nan"))
    )
    return {
        "rms": float(adv.pow(2).mean().sqrt()),
        "mean": float(adv.mean()),
        "corr": float(corr),
    }


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--checkpoint",
        required=True,
        help="a hard-attention checkpoint of bench_flickr8k.py quality (or `train`)",
    )
    p.add_argument(
        "--split",
        choices=["train", "val"],
        default="train",
        help="whose captions: the training ones (what the "
        "baseline met in training) or val",
    )
    p.add_argument(
        "--images",
        type=int,
        default=1000,
        help="the split's first N images (all their captions)",
    )
    p.add_argument("--batch", type=int, default=100, help="captions per forward pass")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="JSON to write (default: next to the checkpoint)")
    args = p.parse_args(argv)
    torch.manual_seed(args.seed)
    live = "train_model" in load_checkpoint(
        args.checkpoint, map_location="cpu"
    )  # a run with --ema keeps its training weights apart
    _, model, vocab, cfg = load_checkpoint_model(args.checkpoint, live=live).model
    if not isinstance(model, ExtendedHardAttentionCaptioner):
        raise SystemExit(f"{args.checkpoint}: not a hard-attention checkpoint")
    recs = load_records(cfg)
    recs = {args.split: recs[args.split][: args.images]}
    store = open_features(cfg, recs)[args.split]
    items = [
        (store.load_record(r), torch.tensor(vocab.encode(c, cfg.max_len)))
        for r in recs[args.split]
        for c in r.captions
    ]
    per_step = model.objective.per_step
    b = float(model.baseline)  # the moving average: per word with rtg, else per caption
    G0, B0ma, B0ex, Gt, Btma, Btex, n_words = [], [], [], [], [], [], 0
    model.train()  # sampled locations and dropout, as in a training step
    with torch.no_grad():
        for i in range(0, len(items), args.batch):
            chunk = items[i : i + args.batch]
            feats = torch.stack([f for f, _ in chunk]).float()
            caps, lengths = pad_captions([c for _, c in chunk])
            logits, _, _ = model.rollout(
                feats, caps, lengths, expected=torch.zeros(len(chunk), dtype=torch.bool)
            )
            word = -word_nll(logits, caps, lengths)  # (B, T) log p(y_t | ·, s̃)
            mask = target_mask(caps, lengths)
            G = rewards_to_go(word)  # (B, T) G_t
            bma = model.objective.baseline_values(
                model, feats, caps, lengths, "moving_average"
            )  # what the model's `loss` subtracts:
            bex = model.objective.baseline_values(
                model, feats, caps, lengths, "expected"
            )  # (B, T) with reward-to-go credit, else per caption
            G0.append(G[:, 0])
            n_words += int(mask.sum())
            if per_step:  # b_0 is the whole caption's baseline
                B0ma.append(bma[:, 0])
                B0ex.append(bex[:, 0])
                Gt.append(G[mask])
                Btma.append(bma[mask])
                Btex.append(bex[mask])
            else:
                B0ma.append(bma.expand(len(G)))
                B0ex.append(bex)
    G0, B0ma, B0ex = map(torch.cat, (G0, B0ma, B0ex))
    if per_step:
        Gt, Btma, Btex = map(torch.cat, (Gt, Btma, Btex))
    res = {
        "checkpoint": str(args.checkpoint),
        "split": args.split,
        "captions": len(G0),
        "words": n_words,
        "credit": model.objective.credit,
        "moving_average": b,
        "caption": {
            "none": stats(G0, G0, torch.zeros_like(G0)),
            "moving_average": stats(G0 - B0ma, G0, B0ma),
            "expected": stats(G0 - B0ex, G0, B0ex),
        },
        "reward_to_go": {
            "none": stats(Gt, Gt, torch.zeros_like(Gt)),
            "moving_average": stats(Gt - Btma, Gt, Btma),
            "expected": stats(Gt - Btex, Gt, Btex),
        }
        if per_step
        else None,
    }
    print(
        f"{args.checkpoint}: {len(G0)} captions of {len(recs[args.split])} "
        f"{args.split} images, {n_words} words; moving average b = {b:.3f} "
        f"per {'word' if per_step else 'caption'}"
    )
    print(
        f"{'advantage':28}{'rms G_0 - b':>14}{'mean':>10}{'corr(b, G)':>12}"
        + (f"{'rms G_t - b_t':>16}{'mean':>10}{'corr':>8}" if per_step else "")
    )
    for k in ("none", "moving_average", "expected"):
        c, t = res["caption"][k], (res["reward_to_go"] or {}).get(k)
        print(
            f"{k:28}{c['rms']:14.3f}{c['mean']:10.3f}{c['corr']:12.3f}"
            + (f"{t['rms']:16.3f}{t['mean']:10.3f}{t['corr']:8.3f}" if t else "")
        )
    out = (
        args.out
        or str(Path(args.checkpoint).with_suffix(""))
        + f"_baseline_variance_{args.split}.json"
    )
    write_json(res, out)


if __name__ == "__main__":
    main()
