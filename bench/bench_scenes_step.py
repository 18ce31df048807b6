"""Seconds per training step of the scenes preset (the CNN trained end to end with the
decoder, batch 32, 16×16 grid), with and without the two speed choices of notebooks
05–07, in the same run:

- the scene CNN in channels-last memory format (notebook 05), against the same CNN in
  PyTorch's default layout;
- the gradients of what every step multiplies (the annotations, W_z, U; hard attention's
  one-hot reads) formed once per batch by `StepOperand` (notebook 06), against
  autograd's per-step accumulation (`step_grads_once = False`).

    # about 3 minutes on 2 idle cores
    .venv/bin/python bench/bench_scenes_step.py --threads 2
    .venv/bin/python bench/bench_scenes_step.py --quick                # smoke run

The same batches are used for every variant; the variants alternate within each
repetition, so load noise is shared. Hard attention is timed past its warm-up (it
samples locations). Prints a table and writes bench/out/scenes_step.json.
"""

import argparse, datetime, platform, statistics, sys, time
from pathlib import Path

import torch
from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import loadavg, step_learner, table, write_json  # noqa: E402
from sat_tutorial.data import CaptionDataset, Vocab, collate_captions  # noqa: E402
from sat_tutorial.scene_cnn import to_annotations  # noqa: E402
from sat_tutorial.training import (
    build_models,
    load_records,
    scenes_config,
    transform_for,
)  # noqa: E402

OUT = Path(__file__).resolve().parent / "out" / "scenes_step.json"


def contiguous_cnn(enc):
    "What-if: the same scene CNN (same weights) in PyTorch's default NCHW layout."
    enc.to(memory_format=torch.contiguous_format)

    def forward(x):
        f = enc.net(x)
        if enc.head is not None:
            f = enc.head(torch.cat([f, enc.coords.expand(len(f), -1, -1, -1)], 1))
        return to_annotations(f)

    enc.forward = forward
    return enc


VARIANTS = {  # name: (channels-last CNN, gradients once per batch)
    "package": (True, True),
    "what-if: grads per step": (True, False),
    "what-if: NCHW CNN": (False, True),
    "what-if: neither": (False, False),
}


def run(args):
    torch.set_num_threads(args.threads) if args.threads else None
    n_batches = 2 if args.quick else args.batches
    result = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "threads": torch.get_num_threads(),
        "load_before": loadavg(),
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "rows": [],
    }
    print(
        f"threads={torch.get_num_threads()}  load before: {result['load_before']}",
        flush=True,
    )
    for name in args.models.split(","):
        cfg = scenes_config(model=name, n_train=64 * n_batches, n_val=1, n_test=1)
        recs = load_records(cfg)
        vocab = Vocab.build((c for r in recs["train"] for c in r.captions), min_count=1)
        ds = CaptionDataset(
            recs["train"], vocab, transform_for(cfg), max_len=cfg.max_len
        )
        batches = [
            b
            for _, b in zip(
                range(n_batches),
                DataLoader(
                    ds,
                    batch_size=cfg.batch_size,
                    shuffle=True,
                    collate_fn=collate_captions,
                    generator=torch.Generator().manual_seed(0),
                ),
            )
        ]
        models = {}
        for v, (cl, once) in VARIANTS.items():
            torch.manual_seed(0)
            enc, model = build_models(cfg, len(vocab))
            if not cl:
                contiguous_cnn(enc)
            model.step_grads_once = once
            if hasattr(model, "train_steps"):
                model.train_steps.fill_(10**6)  # past any warm-up
            opt = torch.optim.Adam(
                list(enc.parameters()) + list(model.parameters()), lr=1e-3
            )
            step_learner(enc, model, opt, lambda learn: batches[:1], 1).fit()  # warm-up
            models[v] = (enc, model, opt)
        times = {v: [] for v in models}
        for r in range(1 if args.quick else args.reps):
            for v in list(models) if r % 2 == 0 else reversed(list(models)):
                enc, model, opt = models[v]
                t0 = time.perf_counter()
                step_learner(enc, model, opt, lambda learn: batches, len(batches)).fit()
                times[v].append((time.perf_counter() - t0) / len(batches))
            print(
                f"  {name} rep {r + 1} (load {loadavg()[0]}): "
                + "  ".join(f"{v} {times[v][-1]:.3f}" for v in models),
                flush=True,
            )
        base = statistics.median(times["what-if: neither"])
        for v, ts in times.items():
            med = statistics.median(ts)
            result["rows"].append(
                {
                    "model": name,
                    "variant": v,
                    "s/step (median)": round(med, 3),
                    "min..max": f"{min(ts):.3f}..{max(ts):.3f}",
                    "steps in 10 min": int(600 / med),
                    "speed-up vs neither": f"{base / med:.2f}x",
                }
            )
    result["load_after"] = loadavg()
    print(
        "\nscenes preset training step (batch 32, 16x16 grid, CNN trained "
        f"end to end), median of {args.reps} "
        f"alternating reps x {n_batches} batches, threads={result['threads']}"
    )
    table(result["rows"])
    out = (
        Path(args.out)
        if args.out
        else OUT.with_name("scenes_step_quick.json" if args.quick else OUT.name)
    )
    write_json(result, out)


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--threads", type=int, default=0, help="torch CPU threads (0: torch's default)"
    )
    p.add_argument("--models", default="soft,hard")
    p.add_argument(
        "--batches", type=int, default=6, help="batches per timed repetition"
    )
    p.add_argument(
        "--reps", type=int, default=5, help="alternating repetitions of each variant"
    )
    p.add_argument(
        "--quick", action="store_true", help="2 batches, 1 repetition: a smoke run"
    )
    p.add_argument("--out", default=None)
    run(p.parse_args(argv))


if __name__ == "__main__":
    main()
