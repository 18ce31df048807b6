import math
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from sat_tutorial.checkpoints import load_checkpoint, save_checkpoint
from sat_tutorial.core import InputError
from sat_tutorial.fit import fit
from sat_tutorial.step_settings import lr_factor
from sat_tutorial.training import (
    TrainConfig,
    load_checkpoint_model,
    scenes_config,
    transform_for,
)
from sat_tutorial.data_order import EpochBatches, EpochSampler

from fakes import QUIET
from fakes import tiny_config as tiny


@pytest.mark.parametrize(
    "pool,ema,optimizer",
    [(0, 0.0, "adam"), (4, 0.0, "adam"), (0, 0.9, "adam"), (0, 0.0, "rmsprop")],
    ids=["plain", "length_pool", "ema", "rmsprop"],
)
def test_exact_resume(tmp_path, pool, ema, optimizer):
    """N steps, stop, resume, N more = 2N straight; also with batches drawn by caption
    length (the resume is mid-epoch), with averaged weights, and with RMSProp (its
    running means and momentum buffer resume too)."""
    cfg = tiny(length_pool=pool, ema=ema, optimizer=optimizer)
    fit(cfg, tmp_path / "a", **QUIET)
    fit(cfg, tmp_path / "b", stop_at=3, **QUIET)
    assert load_checkpoint(tmp_path / "b" / "last.pt")["step"] == 3
    fit(cfg, tmp_path / "b", resume=True, **QUIET)
    a, b = (
        load_checkpoint(tmp_path / "a" / "last.pt"),
        load_checkpoint(tmp_path / "b" / "last.pt"),
    )
    for part in ("model", "encoder") + (
        ("train_model", "train_encoder") if ema else ()
    ):
        assert all(torch.equal(a[part][k], b[part][k]) for k in a[part]), part
    state_a, state_b = a["optimizer"]["state"][0], b["optimizer"]["state"][0]
    assert set(state_a) == (
        {"step", "exp_avg", "exp_avg_sq"}
        if optimizer == "adam"
        else {"step", "square_avg", "grad_avg", "momentum_buffer"}
    )
    assert all(torch.equal(state_a[k], state_b[k]) for k in state_a)
    assert ("ema_updates" in a) == bool(ema) and a.get("ema_updates") in (None, 6)
    if (
        optimizer == "rmsprop"
    ):  # the other optimizer's state cannot carry on: refused by name, before any step
        with pytest.raises(
            ValueError,
            match="was trained with optimizer='rmsprop', but this run has optimizer='adam'",
        ):
            fit(
                tiny(length_pool=pool, ema=ema, steps=8),
                tmp_path / "b",
                resume=True,
                **QUIET,
            )


def test_averaged_weights_are_what_checkpoints_give(tmp_path):
    """With ema, a checkpoint's model is the average of the live weights (kept under
    train_model), and load_checkpoint_model decodes with it."""
    from sat_tutorial.step_settings import ema_decay

    cfg = tiny(ema=0.9, steps=4, ckpt_every=1)
    lives = []
    for n in range(1, 5):  # the live weights after each step, from last.pt
        fit(cfg, tmp_path, stop_at=n, resume=n > 1, **QUIET)
        lives.append(load_checkpoint(tmp_path / "last.pt")["train_model"])
    ck = load_checkpoint(tmp_path / "last.pt")
    d = [0.0] + [ema_decay(k, 0.9) for k in range(2, 5)]
    w = [(1 - d[k]) * math.prod(d[k + 1 :]) for k in range(4)]
    for k, v in ck["model"].items():
        if v.is_floating_point():
            assert torch.allclose(
                v, sum(wk * live[k] for wk, live in zip(w, lives)), atol=1e-6
            ), k
    assert not torch.equal(
        ck["model"]["embed.weight"], ck["train_model"]["embed.weight"]
    )
    _, model, _, _ = load_checkpoint_model(
        tmp_path / "best.pt"
    ).model  # no validation split: best.pt is the end of the run
    assert torch.equal(model.state_dict()["embed.weight"], ck["model"]["embed.weight"])
    _, live, _, _ = load_checkpoint_model(
        tmp_path / "last.pt", live=True
    ).model  # `evaluate --live-weights`
    assert torch.equal(
        live.state_dict()["embed.weight"], ck["train_model"]["embed.weight"]
    )
    with pytest.raises(ValueError, match="ema must be a number ≥ 0 and < 1, not 1.5"):
        fit(tiny(ema=1.5), tmp_path / "bad", **QUIET)
    # a run without the average, resumed with it after its last step: checkpoints keep the live weights, not the average's first copy
    fit(tiny(steps=4), tmp_path / "plain", **QUIET)
    trained = load_checkpoint(tmp_path / "plain" / "last.pt")["model"][
        "embed.weight"
    ]  # the weights of the 4 steps
    fit(tiny(steps=4, ema=0.9), tmp_path / "plain", resume=True, **QUIET)
    plain = load_checkpoint(tmp_path / "plain" / "last.pt")
    _, model, _, _ = load_checkpoint_model(tmp_path / "plain" / "best.pt").model
    assert "ema_updates" not in plain and torch.equal(
        plain["model"]["embed.weight"], trained
    )
    assert torch.equal(model.state_dict()["embed.weight"], trained)
    with pytest.raises(
        ValueError, match="best.pt has no live weights apart from its avera"
    ):
        load_checkpoint_model(tmp_path / "plain" / "best.pt", live=True)


def test_keep_validated_keeps_each_validated_checkpoint(tmp_path):
    """keep_validated: val_step<N>.pt at every validation, holding the weights validated
    there (the average with ema); off: none."""
    cfg = tiny(
        steps=6, n_val=8, val_every=2, ckpt_every=2, ema=0.9, keep_validated=True
    )
    summary = fit(cfg, tmp_path / "kept", **QUIET)
    kept = sorted(p.name for p in (tmp_path / "kept").glob("val_step*.pt"))
    assert kept == ["val_step2.pt", "val_step4.pt", "val_step6.pt"]
    history = load_checkpoint(tmp_path / "kept" / "last.pt")["history"]
    assert [h["step"] for h in history if "val" in h] == [2, 4, 6]
    for n in (2, 4, 6):
        ck = load_checkpoint(tmp_path / "kept" / f"val_step{n}.pt")
        assert ck["step"] == n and "train_model" in ck
    best, end, last = (
        load_checkpoint(tmp_path / "kept" / f)
        for f in ("best.pt", f"val_step{summary['best']['step']}.pt", "last.pt")
    )
    assert all(torch.equal(best["model"][k], end["model"][k]) for k in best["model"])
    six = load_checkpoint(tmp_path / "kept" / "val_step6.pt")
    assert all(
        torch.equal(six[p][k], last[p][k])
        for p in ("model", "train_model")
        for k in last[p]
    )
    assert not torch.equal(
        six["model"]["embed.weight"],
        load_checkpoint(tmp_path / "kept" / "val_step2.pt")["model"]["embed.weight"],
    )
    fit(tiny(steps=2, n_val=8, val_every=2), tmp_path / "plain", **QUIET)
    assert not list((tmp_path / "plain").glob("val_step*.pt"))


def test_length_pool_reaches_the_sampler(tmp_path, monkeypatch):
    from sat_tutorial import fit as fit_module

    seen = []

    class Spy(EpochBatches):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            seen.append(self)

    monkeypatch.setattr(fit_module, "EpochBatches", Spy)
    fit(tiny(length_pool=4, steps=2), tmp_path / "pool", **QUIET)
    fit(tiny(steps=2), tmp_path / "plain", **QUIET)
    pooled, plain = seen[0], seen[-1]
    assert pooled.pool == 4 and plain.lengths is None
    assert (
        len(pooled.lengths) == pooled.n and min(pooled.lengths) >= 3
    )  # <start>, a word at least, <end>
    span = lambda b: (
        max(pooled.lengths[i] for i in b) - min(pooled.lengths[i] for i in b)
    )
    shuffled = EpochBatches(
        pooled.n, pooled.bs, pooled.seed, 0
    ).batches()  # the same items, the plain order
    assert (
        sum(map(span, pooled.batches())) < sum(map(span, shuffled)) / 2
    )  # captions of similar length together


def test_length_pool_is_refused_for_self_critical_training(tmp_path):
    with pytest.raises(
        ValueError,
        match="length_pool sorts reference captions for cross-entropy training",
    ):
        fit(tiny(length_pool=4, scst=True), tmp_path, **QUIET)
    with pytest.raises(
        ValueError, match="length_pool must be an integer ≥ 0 and ≤ 10000, not -2"
    ):
        fit(tiny(length_pool=-2), tmp_path, **QUIET)


def test_self_critical_training_moves_hard_attention_weights(tmp_path):
    """SCST on a hard-attention model also trains where it looks: the attention weights
    change (they got no gradient without log α_t(s_t))."""
    fit(tiny(model="hard", steps=3), tmp_path / "ce", **QUIET)
    fit(
        tiny(
            model="hard",
            steps=3,
            scst=True,
            init_from=str(tmp_path / "ce" / "last.pt"),
            lr=1e-2,
        ),
        tmp_path / "scst",
        **QUIET,
    )
    before, after = (
        load_checkpoint(tmp_path / d / "last.pt")["model"] for d in ("ce", "scst")
    )
    moved = {
        k
        for k in before
        if k.startswith("attention.") and not torch.equal(before[k], after[k])
    }
    assert {
        "attention.W_a.weight",
        "attention.W_h.weight",
        "attention.w.weight",
    } <= moved, moved


def test_refuses_other_model_and_garbage(tmp_path):
    fit(tiny(), tmp_path, stop_at=1, **QUIET)
    with pytest.raises(
        ValueError, match="trained with hidden_dim=8, but this run has hidden_dim=16"
    ):
        fit(tiny(hidden_dim=16), tmp_path, resume=True, **QUIET)
    save_checkpoint({"hello": 1}, tmp_path / "x.pt")
    with pytest.raises(ValueError, match="not a sat_tutorial captioner checkpoint"):
        load_checkpoint_model(tmp_path / "x.pt")


def test_checkpoint_roundtrip_gives_same_model(tmp_path):
    cfg = tiny()
    fit(cfg, tmp_path, **QUIET)
    enc, model, vocab, cfg2 = load_checkpoint_model(tmp_path / "last.pt").model
    assert cfg2 == cfg and len(vocab) > 10
    ck = load_checkpoint(tmp_path / "last.pt")
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in ck["model"].items())


def test_input_dropout_reaches_the_model_and_the_checkpoint(tmp_path, monkeypatch):
    """model_kwargs' input_dropout (notebook 06b) is built, saved and loaded; it changes
    training, and at its default 0 nothing."""
    runs = {p: tmp_path / f"p{p}" for p in (0.0, 0.3)}
    for p, out in runs.items():
        fit(
            tiny(
                model_kwargs={"alpha_c": 0.0, "input_dropout": p}
                if p
                else {"alpha_c": 0.0}
            ),
            out,
            **QUIET,
        )
    models = {
        p: load_checkpoint_model(out / "last.pt").model.captioner
        for p, out in runs.items()
    }
    assert models[0.3].input_dropout.p == 0.3 and models[0.0].input_dropout.p == 0.0
    assert not torch.equal(
        models[0.3].L_o.weight, models[0.0].L_o.weight
    )  # the masks changed the steps
    # the default trains bitwise as the input gates without any dropout call did (no RNG drawn, no arithmetic changed)
    from sat_tutorial.soft_attention import SoftAttentionCaptioner

    def gates_without_dropout(self, emb):
        return (
            emb @ self.lstm.weight_ih[:, : self.embed_dim].T
            + self.lstm.bias_ih
            + self.lstm.bias_hh
        )

    monkeypatch.setattr(SoftAttentionCaptioner, "_input_gates", gates_without_dropout)
    fit(tiny(model_kwargs={"alpha_c": 0.0}), tmp_path / "no_dropout", **QUIET)
    assert torch.equal(
        load_checkpoint_model(
            tmp_path / "no_dropout" / "last.pt"
        ).model.captioner.L_o.weight,
        models[0.0].L_o.weight,
    )


@pytest.mark.parametrize(
    "option", ["input_dropout", "label_smoothing", "uniform_attention"]
)
def test_the_papers_classes_refuse_the_options_the_paper_does_not_have(option):
    """Notebook 06b's three options are on `--model soft` and `hard`; the paper's
    classes (`soft-paper`, `hard-paper`) refuse them in one line naming the option."""
    from sat_tutorial.training import build_models

    value = True if option == "uniform_attention" else 0.1
    for name in ("soft", "hard"):
        _, model = build_models(tiny(model=name, model_kwargs={option: value}), 20)
        got = getattr(model, option)
        assert (got.p if option == "input_dropout" else got) == value
    for name in ("soft-paper", "hard-paper"):
        with pytest.raises(InputError, match=f"{name} does not take that.*{option}"):
            build_models(tiny(model=name, model_kwargs={option: value}), 20)


def test_label_smoothing_reaches_the_model_and_reports_the_likelihood(tmp_path):
    """model_kwargs' label_smoothing (notebook 06b) is built, saved and loaded; it
    changes training; the logged NLL stays log p(y|a)."""
    runs = {e: tmp_path / f"ls{e}" for e in (0.0, 0.2)}
    for e, out in runs.items():
        fit(tiny(model_kwargs={"alpha_c": 0.0, "label_smoothing": e}), out, **QUIET)
    cks = {e: load_checkpoint(out / "last.pt") for e, out in runs.items()}
    models = {
        e: load_checkpoint_model(out / "last.pt").model.captioner
        for e, out in runs.items()
    }
    assert models[0.2].label_smoothing == 0.2 and models[0.0].label_smoothing == 0.0
    assert not torch.equal(models[0.2].L_o.weight, models[0.0].L_o.weight)
    first = {
        e: ck["history"][0] for e, ck in cks.items()
    }  # step 1: the same weights and batch in both runs
    assert (
        first[0.2]["nll"] == first[0.0]["nll"]
    )  # the likelihood, not the smoothed loss
    assert first[0.2]["loss"] != first[0.0]["loss"]
    with pytest.raises(ValueError, match="label_smoothing"):
        fit(tiny(model_kwargs={"label_smoothing": 1.0}), tmp_path / "bad", **QUIET)


def test_config_and_schedule():
    with pytest.raises(ValueError, match="unknown configuration keys"):
        TrainConfig.from_dict({**asdict(TrainConfig()), "colour": 1})
    assert lr_factor(0, 10, 100) == pytest.approx(0.1)
    assert lr_factor(9, 10, 100) == pytest.approx(
        0.1 + 0.45 * (1 + math.cos(math.pi * 0.09))
    )
    assert lr_factor(100, 10, 100) == pytest.approx(0.1)
    assert sorted(EpochSampler(7, 1, 3)) == list(range(7))
    assert lr_factor(5, 0, 100, clock=0.5) == pytest.approx(
        0.55
    )  # the clock is ahead of the steps: it sets the phase
    assert lr_factor(60, 0, 100, clock=0.5) == pytest.approx(
        0.1 + 0.45 * (1 + math.cos(math.pi * 0.6))
    )


def test_time_budget_decays_the_learning_rate_and_survives_resume(
    tmp_path, monkeypatch
):
    """A run ended by its time budget ends at a tenth of the learning rate; a resumed
    run continues the same budget."""
    import types
    import sat_tutorial.learner as learner_module

    calls = iter(range(10_000))
    monkeypatch.setattr(
        learner_module,
        "time",
        types.SimpleNamespace(perf_counter=lambda: 6.0 * next(calls)),
    )  # 6 s a reading
    cfg = tiny(
        steps=1000, time_budget=1.0
    )  # the step plan alone would keep the rate near its top
    fit(cfg, tmp_path / "a", **QUIET)
    a = load_checkpoint(tmp_path / "a" / "last.pt")
    assert 5 <= a["step"] <= 12 and a["minutes"] >= 1.0
    assert a["scheduler"]["_last_lr"][0] == pytest.approx(0.1 * cfg.lr)
    fit(cfg, tmp_path / "b", stop_at=5, **QUIET)
    spent = load_checkpoint(tmp_path / "b" / "last.pt")["minutes"]
    assert 0.4 < spent < 1.0
    fit(cfg, tmp_path / "b", resume=True, **QUIET)
    b = load_checkpoint(tmp_path / "b" / "last.pt")
    assert (
        b["minutes"] >= 1.0 and b["step"] < 5 + a["step"]
    )  # a fresh budget would have run a["step"] more steps
    assert b["scheduler"]["_last_lr"][0] == pytest.approx(0.1 * cfg.lr)
    fit(
        cfg, tmp_path / "b", resume=True, **QUIET
    )  # its budget is used up: no further step
    assert load_checkpoint(tmp_path / "b" / "last.pt")["step"] == b["step"]


# --- real-data paths: stored features, bad input, several processes -------------------------------------------------

import json, os, subprocess, sys, warnings
from dataclasses import replace

from fakes import fake_dataset, fake_features
from sat_tutorial.cli import main
from sat_tutorial.training import open_features


def features_cfg(tmp_path, **kw):
    """A tiny soft-attention run on a fake Flickr8k from a fake resnet50 feature file
    (2×2 grid, D=16)."""
    fake_dataset(tmp_path, 40)
    f = tmp_path / "feats.h5"
    if not f.exists():
        fake_features(f, [f"{i:03d}.jpg" for i in range(40)])
    base = dict(
        model="soft",
        data="flickr8k",
        data_dir=str(tmp_path),
        features=str(f),
        encoder="resnet50",
        grid=2,
        embed_dim=8,
        hidden_dim=8,
        attention_dim=8,
        dropout=0.2,
        batch_size=8,
        steps=8,
        warmup=2,
        lr=3e-3,
        min_count=1,
        val_every=0,
        ckpt_every=0,
        seed=4,
    )
    return TrainConfig(**{**base, **kw})


def test_image_size_is_for_image_backbones():
    from PIL import Image

    assert transform_for(
        TrainConfig(data="flickr8k", encoder="resnet50", image_size=96)
    )(Image.new("RGB", (50, 40))).shape == (3, 96, 96)
    for enc in ("scene_cnn", "scene_regions"):
        with pytest.raises(
            ValueError,
            match=f"the scene encoder '{enc}' reads the 64-pixel scenes as they are",
        ):
            transform_for(scenes_config(encoder=enc, image_size=96))


def test_features_path_trains_validates_and_resumes_exactly(tmp_path):
    cfg = features_cfg(tmp_path)
    s = fit(replace(cfg, val_every=4), tmp_path / "v", **QUIET)
    assert (
        s["best"]["step"] in (4, 8) and s["best"]["cider"] >= 0
    )  # validated by decoding the stored val features
    enc, model, vocab, cfg2 = load_checkpoint_model(tmp_path / "v" / "best.pt").model
    assert cfg2.feature_dim == 16 and sum(p.numel() for p in enc.parameters()) == 0
    fit(cfg, tmp_path / "a", **QUIET)
    fit(cfg, tmp_path / "b", stop_at=3, **QUIET)
    fit(cfg, tmp_path / "b", resume=True, **QUIET)
    a, b = (
        load_checkpoint(tmp_path / "a" / "last.pt"),
        load_checkpoint(tmp_path / "b" / "last.pt"),
    )
    assert a["step"] == b["step"] == 8
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert [h["loss"] for h in a["history"]] == [h["loss"] for h in b["history"]]


def test_evaluate_command_on_a_features_checkpoint(tmp_path):
    fit(features_cfg(tmp_path), tmp_path / "run", **QUIET)
    assert (
        main(
            [
                "evaluate",
                "--checkpoint",
                str(tmp_path / "run" / "best.pt"),
                "--json",
                str(tmp_path / "m.json"),
                "--beam-size",
                "2",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "m.json").read_text())["metrics"]["n_images"] == 4


def test_evaluate_skips_test_images_without_features_counted(tmp_path):
    "a test image the feature file lacks is skipped with a warning, as in training"
    cfg = features_cfg(tmp_path, max_missing=0.3)
    fit(cfg, tmp_path / "run", **QUIET)
    fake_features(Path(cfg.features), [f"{i:03d}.jpg" for i in range(39)])  # no 039
    argv = ["evaluate", "--checkpoint", str(tmp_path / "run" / "best.pt")]
    with pytest.warns(UserWarning, match=r"1 of 4 test images have no features"):
        assert main([*argv, "--json", str(tmp_path / "m.json"), "--device", "cpu"]) == 0
    assert json.loads((tmp_path / "m.json").read_text())["metrics"]["n_images"] == 3


@pytest.mark.parametrize(
    "change,message",
    [
        (
            dict(backbone="vgg16"),
            "was made with backbone='vgg16', but 'resnet50' is expected",
        ),
        (dict(grid=3), "was made with grid=3, but 2 is expected"),
        (dict(dataset="coco"), "was made with dataset='coco'"),
    ],
)
def test_features_from_another_backbone_are_refused_before_training(
    tmp_path, change, message
):
    cfg = features_cfg(tmp_path)
    fake_features(Path(cfg.features), [f"{i:03d}.jpg" for i in range(40)], **change)
    with pytest.raises(ValueError, match=message):
        fit(cfg, tmp_path / "out", **QUIET)
    assert not (tmp_path / "out" / "last.pt").exists()


def test_truncated_or_foreign_feature_files_are_refused(tmp_path):
    cfg = features_cfg(tmp_path)
    raw = Path(cfg.features).read_bytes()
    Path(cfg.features).write_bytes(raw[: len(raw) - 2000])  # a copy cut short
    with pytest.raises(ValueError, match="feats.h5"):
        fit(cfg, tmp_path / "out", **QUIET)
    fake_features(
        Path(cfg.features), [f"other_{i}.jpg" for i in range(40)]
    )  # features of other images
    with pytest.raises(
        ValueError,
        match=r"32 of 32 train images have no features in .*feats.h5 \(32 not in the file",
    ):
        fit(cfg, tmp_path / "out", **QUIET)


def test_a_few_images_without_features_are_a_counted_skip(tmp_path):
    cfg = features_cfg(tmp_path, max_missing=0.1, steps=2)
    fake_features(
        Path(cfg.features), [f"{i:03d}.jpg" for i in range(1, 40)], failed=[5]
    )  # 000.jpg absent, 006.jpg unreadable
    with pytest.warns(
        UserWarning,
        match=r"2 of 32 train images have no features .*\(1 not in the file, 1 unreadable at extraction; "
        r"first: 000.jpg, 006.jpg\); they are skipped",
    ):
        s = fit(cfg, tmp_path / "out", **QUIET)
    assert s["data_problems"] == {"images_without_features": 2}


def test_mirror_features_add_each_image_mirrored_with_left_and_right_swapped(tmp_path):
    from sat_tutorial.karpathy import tokenize
    from sat_tutorial.feature_store import FeatureStore
    from sat_tutorial.training import build_vocab, load_records, training_set

    keys = [f"{i:03d}.jpg" for i in range(40)]
    cfg = features_cfg(tmp_path, steps=6)
    cfg = replace(
        cfg,
        mirror_features=str(
            fake_features(tmp_path / "mirror.h5", keys, seed=1, mirrored=True)
        ),
    )
    records = load_records(cfg)
    stores = open_features(cfg, records)
    records["train"][0] = replace(
        records["train"][0],
        captions=[tokenize("a dog left of a cat")],
        raw=["A dog left of a cat."],
    )
    vocab = build_vocab(cfg, records)
    assert (
        "right" in vocab.stoi
        and "right" not in build_vocab(replace(cfg, mirror_features=None), records).stoi
    )
    plain, ds = (
        training_set(replace(cfg, mirror_features=None), records, stores, vocab),
        training_set(cfg, records, stores, vocab),
    )
    assert (
        len(ds) == 2 * len(plain) == 2 * sum(len(r.captions) for r in records["train"])
    )
    a, m = ds[0], ds[len(plain)]  # record 0's first caption, as it is and mirrored
    with FeatureStore(cfg.features) as f, FeatureStore(cfg.mirror_features) as g:
        assert torch.equal(a["image"].float(), f["000.jpg"]) and torch.equal(
            m["image"].float(), g["000.jpg"]
        )
        assert not torch.equal(f["000.jpg"], g["000.jpg"])
    assert vocab.decode(a["caption"].tolist()) == "a dog left of a cat".split()
    assert vocab.decode(m["caption"].tolist()) == "a dog right of a cat".split() and m[
        "refs"
    ] == ["A dog right of a cat."]
    assert all(
        torch.equal(ds[i]["caption"], plain[i]["caption"]) for i in range(len(plain))
    )
    with pytest.raises(ValueError, match="need features"):
        training_set(replace(cfg, features=None), records, {}, vocab)
    # trains, and resumes exactly inside the doubled epoch: 10 steps of 8 captions, past the 8 steps of a plain epoch (64 captions)
    fit(replace(cfg, steps=10), tmp_path / "a", **QUIET)
    fit(replace(cfg, steps=10), tmp_path / "b", stop_at=9, **QUIET)
    fit(replace(cfg, steps=10), tmp_path / "b", resume=True, **QUIET)
    a, b = (
        load_checkpoint(tmp_path / "a" / "last.pt"),
        load_checkpoint(tmp_path / "b" / "last.pt"),
    )
    assert a["step"] == b["step"] == 10 and a["epoch"] == b["epoch"] == 0
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


def test_mirrored_and_plain_feature_files_cannot_be_swapped(tmp_path):
    keys = [f"{i:03d}.jpg" for i in range(40)]
    cfg = features_cfg(tmp_path)
    mirror = fake_features(tmp_path / "mirror.h5", keys, seed=1, mirrored=True)
    with pytest.raises(
        ValueError,
        match=r"mirror.h5 holds features of the images flipped left to right: pass it as --mirror-features",
    ):
        fit(replace(cfg, features=str(mirror)), tmp_path / "out", **QUIET)
    with pytest.raises(
        ValueError,
        match=r"feats.h5 holds features of the images as they are: --mirror-features wants a file made by extract-features --mirror",
    ):
        fit(replace(cfg, mirror_features=cfg.features), tmp_path / "out", **QUIET)
    with pytest.raises(
        ValueError, match=r"mirror.h5 was made with grid=3, but 2 is expected"
    ):
        fit(
            replace(
                cfg,
                mirror_features=str(
                    fake_features(tmp_path / "mirror.h5", keys, L=9, mirrored=True)
                ),
            ),
            tmp_path / "out",
            **QUIET,
        )
    assert not (tmp_path / "out" / "last.pt").exists()


def test_bad_images_and_captions_at_scale_train_to_the_end_with_a_summary(tmp_path):
    d = fake_dataset(tmp_path, 60, size=64)
    js = json.loads((d / "dataset_flickr8k.json").read_text())
    (d / "images" / "007.jpg").unlink()  # missing
    whole = (d / "images" / "011.jpg").read_bytes()
    (d / "images" / "011.jpg").write_bytes(
        whole[: len(whole) // 2]
    )  # truncated: its header reads, found when decoded
    (d / "images" / "013.jpg").write_text("<html>not an image</html>")  # not an image
    (d / "images" / "055.jpg").write_bytes(b"")  # empty file, in val
    odd = [
        {"raw": ""},
        {"raw": " ... !!"},
        {"raw": "A Café, naïve & ☃-shaped!", "tokens": []},
        {"raw": "dog " * 80},
    ]
    js["images"][3]["sentences"] += odd  # 2 empty, 1 unicode, 1 very long
    js["images"][4]["sentences"] = [{"raw": "  "}]  # an image with no usable caption
    (d / "dataset_flickr8k.json").write_text(json.dumps(js))
    cfg = scenes_config(
        data="flickr8k",
        data_dir=str(tmp_path),
        encoder="scene_cnn",
        feature_dim=8,
        embed_dim=8,
        hidden_dim=8,
        attention_dim=8,
        batch_size=16,
        epochs=1,
        steps=0,
        val_every=5,
        max_missing=0.1,
        seed=1,
        n_val=0,
        n_test=0,
    )
    lines = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = fit(cfg, tmp_path / "out", progress=False, log=lines.append)
    assert s["steps"] == 6  # one whole epoch: 94 captions / 16
    p = s["data_problems"]
    assert (
        p["missing_image_files"] == 1
        and p["empty_captions"] == 3
        and p["images_without_captions"] == 1
    )
    assert (
        p["unreadable_image_files"] == 2
    )  # not images at all: counted (toward max_missing) at load
    assert (
        p["unreadable_image_items"] == 2
    )  # the truncated training image × 2 captions, when decoded
    assert any(
        l.startswith("skipped data: ")
        and "1 missing image files" in l
        and "2 unreadable image items" in l
        for l in lines
    )
    summary = json.loads((tmp_path / "out" / "train_summary.json").read_text())
    assert summary["data_problems"] == p
    assert summary["data"] == (  # where the data came from, by its files
        f"flickr8k: captions {d / 'dataset_flickr8k.json'}, images {d / 'images'}"
    )


def _train_args(tmp_path, f):
    return [
        "train",
        "--data",
        "flickr8k",
        "--data-dir",
        str(tmp_path),
        "--features",
        str(f),
        "--encoder",
        "resnet50",
        "--grid",
        "2",
        "--embed-dim",
        "8",
        "--hidden-dim",
        "8",
        "--attention-dim",
        "8",
        "--dropout",
        "0",
        "--batch-size",
        "7",
        "--steps",
        "12",
        "--val-every",
        "6",
        "--ckpt-every",
        "0",
        "--min-count",
        "1",
        "--warmup",
        "2",
        "--lr",
        "3e-3",
        "--seed",
        "2",
        "--device",
        "cpu",
        "--model-kwargs",
        '{"alpha_c": 1.0}',
    ]


@pytest.mark.parametrize(
    "extra",
    [[], ["--length-pool", "3"], ["--ema", "0.9"]],
    ids=["shuffled", "length_pool", "ema"],
)
def test_two_gloo_processes_match_one_process(tmp_path, extra):
    """torchrun with 2 CPU processes: the same per-step losses and final weights as one
    process with the same global batch (also with batches by length, whose word weight
    GlobalBatchLoss must apply)."""
    fake_dataset(tmp_path, 40)
    f = fake_features(tmp_path / "feats.h5", [f"{i:03d}.jpg" for i in range(40)])
    assert (
        main(_train_args(tmp_path, f) + extra + ["--out", str(tmp_path / "one")]) == 0
    )
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONFAULTHANDLER": "1",
    }  # a worker that dies prints where
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            "-m",
            "sat_tutorial",
            *_train_args(tmp_path, f),
            *extra,
            "--out",
            str(tmp_path / "two"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "distributed training on 2 processes (gloo)" in r.stdout
    one, two = (
        load_checkpoint(tmp_path / "one" / "last.pt"),
        load_checkpoint(tmp_path / "two" / "last.pt"),
    )
    assert (
        one["step"] == two["step"] == 12
    )  # 80 captions / 7 = 12 batches, the last of 3
    l1, l2 = [h["loss"] for h in one["history"]], [h["loss"] for h in two["history"]]
    assert l1 == pytest.approx(l2, rel=1e-5, abs=1e-6)
    assert [h["nll"] for h in one["history"]] == pytest.approx(
        [h["nll"] for h in two["history"]], rel=1e-5, abs=1e-6
    )
    # attention.w.bias adds the same constant to every score before the softmax over locations, so its exact gradient is 0:
    # what it receives is float rounding noise (~1e-9), which Adam divides by its own tiny running scale into steps of up to
    # ~lr. Its value therefore differs between any two runs that round differently, and changes no output. Every other
    # weight must agree, and so must the two models' outputs.
    for k in one["model"]:
        if k != "attention.w.bias":
            assert torch.allclose(
                one["model"][k], two["model"][k], atol=1e-5, rtol=1e-4
            ), k
    with torch.no_grad():
        logits = []
        for ck in (one, two):
            enc, model, vocab, _ = load_checkpoint_model(
                tmp_path / ("one" if ck is one else "two") / "last.pt"
            ).model
            caps = torch.tensor([[1, 4, 5, 6, 2], [1, 7, 8, 2, 0], [1, 9, 2, 0, 0]])
            torch.manual_seed(0)
            logits.append(model(torch.rand(3, 4, 16), caps, torch.tensor([5, 4, 3]))[0])
    assert torch.allclose(logits[0], logits[1], atol=1e-4)
    assert len(two["rng_ranks"]) == 2 and two["history"][5]["val"][
        "cider"
    ] == pytest.approx(one["history"][5]["val"]["cider"])
    assert (
        json.loads((tmp_path / "two" / "train_summary.json").read_text())["world_size"]
        == 2
    )


def test_two_gloo_processes_stop_together_on_a_time_budget(tmp_path):
    """A time budget under torchrun: the processes' clocks differ, yet all stop after
    the same step (else the collectives hang)."""
    fake_dataset(tmp_path, 40)
    f = fake_features(tmp_path / "feats.h5", [f"{i:03d}.jpg" for i in range(40)])
    args = _train_args(tmp_path, f)
    args[args.index("--steps") + 1], args[args.index("--val-every") + 1] = "100000", "0"
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONFAULTHANDLER": "1",
    }  # a worker that dies prints where
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            "-m",
            "sat_tutorial",
            *args,
            "--time-budget",
            "0.05",
            "--out",
            str(tmp_path / "two"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )  # about 15 s when the processes agree
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    ck = load_checkpoint(tmp_path / "two" / "last.pt")
    summary = json.loads((tmp_path / "two" / "train_summary.json").read_text())
    assert (
        0 < ck["step"] == summary["steps"] < 100000
        and summary["minutes"] >= 0.05
        and summary["world_size"] == 2
    )


def test_amp_warns_on_a_cpu_without_fast_bf16(monkeypatch):
    """`--amp` on a CPU with bf16 only emulated (AVX2) still trains in bf16 but warns
    that float32 is faster; with fast bf16 it is silent."""
    import warnings
    import sat_tutorial.step_settings as tr

    cfg = scenes_config(amp=True)
    # without oneDNN's private test, the capability string decides
    import types

    monkeypatch.setattr(torch.ops, "mkldnn", types.SimpleNamespace())
    for capability, fast in (("AVX512_BF16", True), ("AVX512", True), ("AVX2", False)):
        monkeypatch.setattr(
            torch.backends.cpu, "get_cpu_capability", lambda: capability
        )
        assert tr.cpu_has_fast_bf16() is fast
    monkeypatch.setattr(tr, "cpu_has_fast_bf16", lambda: False)
    with pytest.warns(UserWarning, match="without fast bfloat16"):
        assert tr.amp_setting(cfg, torch.device("cpu")) == (torch.bfloat16, None)
    monkeypatch.setattr(tr, "cpu_has_fast_bf16", lambda: True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tr.amp_setting(cfg, torch.device("cpu")) == (torch.bfloat16, None)
        assert tr.amp_setting(scenes_config(), torch.device("cpu")) == (None, None)


def test_more_torchrun_processes_than_gpus_is_a_clear_error(monkeypatch):
    """LOCAL_RANK 1 on a machine with one GPU: a message that says what to change,
    before any process group is joined."""
    import sat_tutorial.optimization as tr

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(tr, "get_device", lambda device: torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(
        RuntimeError,
        match="LOCAL_RANK 1 has no GPU of its own: this machine has 1. Start at most 1",
    ):
        tr.init_distributed("cuda")


def test_amp_dtype_choices(monkeypatch):
    """`amp_dtype`: auto takes bf16 where the device has it and fp16 with a loss scaler
    where not; fp16 is scaled anywhere; bf16 refuses a GPU without it."""
    import warnings
    import sat_tutorial.step_settings as tr

    monkeypatch.setattr(tr, "cpu_has_fast_bf16", lambda: True)
    cpu = torch.device("cpu")
    with pytest.warns(UserWarning, match="fp16 on a CPU"):
        dtype, scaler = tr.amp_setting(scenes_config(amp=True, amp_dtype="fp16"), cpu)
    assert dtype == torch.float16 and isinstance(scaler, torch.amp.GradScaler)
    assert tr.amp_setting(scenes_config(amp=True, amp_dtype="bf16"), cpu) == (
        torch.bfloat16,
        None,
    )
    assert tr.amp_setting(scenes_config(amp_dtype="fp16"), cpu) == (
        None,
        None,
    )  # without amp: float32
    with pytest.raises(ValueError, match="amp_dtype must be one of"):
        tr.amp_setting(scenes_config(amp=True, amp_dtype="float16"), cpu)
    monkeypatch.setattr(
        torch.cuda, "is_bf16_supported", lambda *a, **k: False
    )  # a GPU without bf16 (V100, T4)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "Tesla V100")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no CUDA here: the scaler says it is disabled
        dtype, scaler = tr.amp_setting(scenes_config(amp=True), torch.device("cuda"))
    assert dtype == torch.float16 and scaler is not None
    with pytest.raises(ValueError, match="Tesla V100 has no bfloat16"):
        tr.amp_setting(scenes_config(amp=True, amp_dtype="bf16"), torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert tr.amp_setting(scenes_config(amp=True), torch.device("cuda")) == (
        torch.bfloat16,
        None,
    )


@pytest.mark.parametrize("dropout", [True, False])
def test_self_critical_samples_with_or_without_dropout(dropout, monkeypatch):
    """scst_dropout=False samples with the eval-mode network (hard attention still
    samples and records its reads); the model comes back in training mode."""
    from sat_tutorial import optimization
    from sat_tutorial.data import Vocab
    from sat_tutorial.hard_attention_beyond import ExtendedHardAttentionCaptioner
    from sat_tutorial.metrics import CiderD

    torch.manual_seed(0)
    model = ExtendedHardAttentionCaptioner(
        6, 3, embed_dim=4, hidden_dim=5, attention_dim=4, dropout=0.5
    ).train()
    seen = []
    real_sample = optimization.sample

    def spy(m, feats, max_len, temperature):
        out = real_sample(m, feats, max_len, temperature)
        seen.append((m.training, temperature, len(m.reads.record) == out[0].shape[1]))
        return out  # one log α_t(s_t) per step

    monkeypatch.setattr(optimization, "sample", spy)
    sc = optimization.SelfCritical(
        CiderD([["red circle".split()]]),
        Vocab(["<pad>", "<start>", "<end>", "<unk>", "red", "circle"]),
        max_len=3,
        n_samples=4,
        temperature=0.7,
        dropout=dropout,
    )
    loss, _ = sc(
        model, torch.randn(2, 5, 3), {"refs": [["red circle"], ["red circle"]]}
    )
    assert seen == [(dropout, 0.7, True)] and model.training and loss.requires_grad
    with pytest.raises(ValueError, match="temperature must be positive"):
        optimization.SelfCritical(sc.cider, sc.vocab, temperature=0.0)


# --- the Learner's guarantees (issue 50) ------------------------------------------------


def test_early_stopping_resumes_where_the_straight_run_stops(tmp_path):
    """The count of validations without improvement is saved: stopped at 6 and resumed,
    a run stops where it would have."""
    cfg = tiny(steps=30, val_every=2, patience=3, n_val=8)
    straight = fit(cfg, tmp_path / "a", **QUIET)
    assert straight["steps"] < 30  # patience ran out: the case under test
    fit(cfg, tmp_path / "b", stop_at=6, **QUIET)
    assert load_checkpoint(tmp_path / "b" / "last.pt")["step"] == 6
    resumed = fit(cfg, tmp_path / "b", resume=True, **QUIET)
    assert resumed["steps"] == straight["steps"]
    assert resumed["best"] == straight["best"]


def test_a_non_finite_loss_stops_the_run_naming_the_step(tmp_path, monkeypatch):
    from sat_tutorial import fit as fit_module
    from sat_tutorial.learner import StopRun

    real, calls = fit_module.caption_loss, []

    def poisoned(run, batch):
        calls.append(1)
        loss, stats = real(run, batch)
        return (loss * float("nan") if len(calls) == 4 else loss), stats

    monkeypatch.setattr(fit_module, "caption_loss", poisoned)
    with pytest.raises(
        StopRun, match=r"step 4: the loss is nan.*last\.pt \(step 2\), is kept"
    ):
        fit(tiny(ckpt_every=2), tmp_path / "a", **QUIET)
    kept = load_checkpoint(tmp_path / "a" / "last.pt")
    assert kept["step"] == 2 and all(v.isfinite().all() for v in kept["model"].values())


def test_a_diverging_update_never_replaces_the_known_good_checkpoint(tmp_path):
    """NaN in the optimiser's moments (as a diverged run leaves them): the first update
    after the resume makes the weights NaN, which stops the run in one line before any
    checkpoint is written (`Diverged`; `write_checkpoint` would refuse it too), so
    last.pt stays the file the run resumed from."""
    from sat_tutorial.learner import StopRun

    fit(tiny(steps=2), tmp_path / "a", **QUIET)
    last = tmp_path / "a" / "last.pt"
    ck = load_checkpoint(last)
    for moments in ck["optimizer"]["state"].values():
        moments["exp_avg"].fill_(float("nan"))
    save_checkpoint(ck, last)
    before = last.read_bytes()
    stop = (
        r"step 3: one update left weights that are not finite.*resumed from \(step 2\)"
    )
    with pytest.raises(StopRun, match=stop):
        fit(tiny(steps=4, ckpt_every=1), tmp_path / "a", resume=True, **QUIET)
    assert last.read_bytes() == before


def test_ctrl_c_saves_the_step_and_the_resume_is_exact(tmp_path, monkeypatch):
    import signal
    from sat_tutorial import fit as fit_module
    from sat_tutorial.learner import Interrupted

    fit(tiny(), tmp_path / "a", **QUIET)
    real = fit_module.caption_loss
    calls = []

    def press(run, batch):  # Ctrl-C during the third step, before its first checkpoint
        calls.append(1)
        if len(calls) == 3:
            signal.raise_signal(signal.SIGINT)
        return real(run, batch)

    monkeypatch.setattr(fit_module, "caption_loss", press)
    before = signal.getsignal(signal.SIGINT)  # a background job's may be SIG_IGN
    with pytest.raises(Interrupted, match="step 3 saved in .*last.pt"):
        fit(tiny(), tmp_path / "b", **QUIET)
    assert signal.getsignal(signal.SIGINT) is before  # the handler of before the run
    monkeypatch.setattr(fit_module, "caption_loss", real)
    assert load_checkpoint(tmp_path / "b" / "last.pt")["step"] == 3
    fit(tiny(), tmp_path / "b", resume=True, **QUIET)
    a, b = (load_checkpoint(tmp_path / d / "last.pt") for d in "ab")
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert a["history"] == b["history"]


@pytest.mark.parametrize(
    "error, said",
    [
        (OSError(28, "No space left on device"), "No space left"),
        (  # what torch's zip writer raises on a full disk
            RuntimeError(
                "[enforce fail at inline_container.cc:672] . PytorchStreamWriter "
                "failed writing file data/0: file write failed"
            ),
            "PytorchStreamWriter failed writing file",
        ),
    ],
)
def test_a_failed_write_is_one_line_and_the_previous_checkpoint_stays(
    tmp_path, monkeypatch, error, said
):
    from sat_tutorial import checkpoints
    from sat_tutorial.learner import StopRun

    real, calls = checkpoints.torch.save, []

    def full_disk(obj, f, *a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise error
        return real(obj, f, *a, **k)

    monkeypatch.setattr(checkpoints.torch, "save", full_disk)
    with pytest.raises(StopRun, match=rf"could not write .*last\.pt: .*{said}"):
        fit(tiny(ckpt_every=2), tmp_path / "a", **QUIET)
    assert load_checkpoint(tmp_path / "a" / "last.pt")["step"] == 2  # still loadable
    assert not [p for p in (tmp_path / "a").iterdir() if p.name.startswith(".")]


def test_checkpoints_with_non_finite_weights_are_refused(tmp_path):
    from sat_tutorial.core import InputError

    fit(tiny(steps=2), tmp_path / "a", **QUIET)
    ck = load_checkpoint(tmp_path / "a" / "best.pt")
    ck["model"]["embed.weight"][0, 0] = float("nan")
    save_checkpoint(ck, tmp_path / "nan.pt")
    with pytest.raises(InputError, match="nan.pt: model weight embed.weight holds NaN"):
        load_checkpoint_model(tmp_path / "nan.pt")
    with pytest.raises(InputError, match="holds NaN"):
        fit(tiny(steps=2, init_from=str(tmp_path / "nan.pt")), tmp_path / "b", **QUIET)


@pytest.mark.parametrize("command", [["train"], ["draw", "train"]])
@pytest.mark.parametrize("where", ["file", "under_file", "read_only"])
def test_every_training_command_checks_out_before_any_work(
    tmp_path, capsys, monkeypatch, command, where
):
    "--out a file, under a file or read-only: one line naming it, before data is read."
    f = tmp_path / "a-file"
    f.write_text("x")
    out = {"file": f, "under_file": f / "run", "read_only": tmp_path / "ro" / "run"}
    if where == "read_only":
        (tmp_path / "ro").mkdir()
        real = os.access  # root writes anywhere: the check asks os.access
        monkeypatch.setattr(
            os, "access", lambda p, m: Path(p).name != "ro" and real(p, m)
        )
    code = main([*command, "--out", str(out[where])])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "--out" in err, err
    assert ("is read-only" if where == "read_only" else "is a file") in err


def test_python_fit_checks_out_as_the_command_does(tmp_path):
    """`fit()` from Python keeps the rules of `train --out`: a folder holding a run is
    refused unless resumed or overwritten, --resume needs a run, and `overwrite`
    deletes the old run's files once the new run has a checkpoint."""
    cfg = tiny(steps=2)
    with pytest.raises(InputError, match="holds no run to resume"):
        fit(cfg, tmp_path / "none", resume=True, **QUIET)
    fit(cfg, tmp_path / "a", **QUIET)
    first = (tmp_path / "a" / "last.pt").read_bytes()
    (tmp_path / "a" / "val_step9.pt").write_bytes(b"x")  # a file only the old run has
    with pytest.raises(InputError, match="already holds a run"):
        fit(cfg, tmp_path / "a", **QUIET)
    assert (tmp_path / "a" / "last.pt").read_bytes() == first  # nothing written
    with pytest.raises(InputError, match="give one of them"):
        fit(cfg, tmp_path / "a", resume=True, overwrite=True, **QUIET)
    fit(tiny(steps=2, seed=1), tmp_path / "a", overwrite=True, **QUIET)
    assert (tmp_path / "a" / "last.pt").read_bytes() != first
    assert not (tmp_path / "a" / "val_step9.pt").exists()
