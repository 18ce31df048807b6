"""The `sat-tutorial` command as a user runs it: every subcommand's --help, and the RAM and DRAW commands end to end."""

import hashlib, json, os, re, subprocess, sys
from pathlib import Path

import pytest

from sat_tutorial.cli import build_parser, main
from sat_tutorial.core import data_root

HAVE_MNIST = (data_root() / "mnist" / "raw" / "train-images-idx3-ubyte.gz").exists()
HAVE_BINARIZED = (
    data_root() / "binarized_mnist" / "binarized_mnist_train.amat.gz"
).exists()


@pytest.mark.parametrize(
    "argv,expect",
    [
        (["ram", "--help"], "evaluate"),
        (["ram", "train", "--help"], "--glimpses"),
        (["ram", "evaluate", "--help"], "--checkpoint"),
        (["draw", "--help"], "sample"),
        (["draw", "train", "--help"], "--read-n"),
        (["draw", "sample", "--help"], "--columns"),
    ],
)
def test_subcommand_help(argv, expect, capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(argv)
    assert e.value.code == 0 and expect in capsys.readouterr().out


def test_help_of_the_installed_command():
    "The console script itself (a separate process), as a user would call it."
    exe = Path(sys.executable).parent / "sat-tutorial"
    r = subprocess.run(
        [str(exe), "ram", "--help"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0 and "train" in r.stdout, r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "sat_tutorial", "draw", "sample", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "--checkpoint" in r.stdout, r.stderr


@pytest.mark.skipif(not HAVE_MNIST, reason="MNIST not in $SAT_TUTORIAL_DATA/mnist/raw")
def test_ram_train_and_evaluate_through_main(tmp_path, capsys):
    assert (
        main(
            [
                "ram",
                "train",
                "--steps",
                "3",
                "--limit",
                "100",
                "--batch-size",
                "20",
                "--glimpses",
                "2",
                "--quiet",
                "--device",
                "cpu",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["steps"] == 3 and 0 <= out["test_error"] <= 1
    assert (
        main(
            [
                "ram",
                "evaluate",
                "--checkpoint",
                str(tmp_path / "ram.pt"),
                "--device",
                "cpu",
                "--json",
                str(tmp_path / "e.json"),
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "e.json").read_text())["n"] == 100


@pytest.mark.skipif(
    not HAVE_BINARIZED,
    reason="binarized MNIST not in $SAT_TUTORIAL_DATA/binarized_mnist",
)
def test_draw_train_and_sample_through_main(tmp_path):
    assert (
        main(
            [
                "draw",
                "train",
                "-T",
                "2",
                "--hidden",
                "8",
                "--z-dim",
                "2",
                "--write-n",
                "3",
                "--batch-size",
                "16",
                "--steps",
                "2",
                "--device",
                "cpu",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "metrics.json").read_text())["steps"] == 2
    assert (
        main(
            [
                "draw",
                "sample",
                "--checkpoint",
                str(tmp_path / "checkpoint.pt"),
                "--n",
                "2",
                "--out",
                str(tmp_path / "s.png"),
            ]
        )
        == 0
    )
    assert (tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG"


def test_train_help_shows_the_defaults_that_apply(capsys):
    "Flags default to None internally ('not given'); --help must show the value the preset fills in, never 'None'."
    from sat_tutorial.training import TrainConfig, scenes_config

    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "default: None" not in out
    assert (
        f"(default: {TrainConfig().hidden_dim}; scenes: {scenes_config().hidden_dim})"
        in out
    )
    # each registered model whose preset differs is listed: the paper classes too
    scenes = scenes_config()
    assert f"(default: resnet101; scenes: {scenes.encoder};" in out
    for m in ("butd", "butd-paper"):
        assert f"; scenes --model {m}: {scenes_config(model=m).encoder}" in out
    assert f"(default: {TrainConfig().lr}; scenes: {scenes.lr};" in out
    for m in ("hard", "hard-paper"):
        assert f"; scenes --model {m}: {scenes_config(model=m).lr}" in out


@pytest.mark.parametrize("cmd", ["evaluate", "caption", "extract-features", "demo"])
def test_help_states_each_default_once(cmd, capsys):
    "A help text that already names its default gets no second '(default: …)'; a None default (not given) is not shown."
    with pytest.raises(SystemExit):
        build_parser().parse_args([cmd, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: None)" not in out
    assert not re.search(
        r"\(default: [^)]*\) \(default:", out
    )  # e.g. "(default: $SAT_TUTORIAL_DATA) (default: None)"
    assert "(default: auto)" in out  # --device: a default is still shown
    if cmd == "extract-features":
        assert "(default: $SAT_TUTORIAL_DATA)" in out and "(default: 512)" in out


def test_demo_end_to_end_tiny(tmp_path, capsys):
    "What `make demo` runs, at a few steps: it trains, evaluates, and writes metrics.json and the PNGs it says it wrote."
    assert (
        main(
            [
                "demo",
                "--out",
                str(tmp_path),
                "--steps",
                "10",
                "--n-train",
                "64",
                "--n-test",
                "12",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["n_images"] == 12 and 0 <= m["bleu4"] <= 100 and 0 <= m["cider"]
    # a 10-step model may name no object at all; when it does, correctness is a share of attention mass
    assert m.get("grounded_words", 0) == 0 or 0 <= m["attention_correctness"] <= 1
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert "scenes.png" in pngs and "attention_0.png" in pngs
    assert all((tmp_path / p).read_bytes()[:4] == b"\x89PNG" for p in pngs)
    assert str(tmp_path / "metrics.json") in capsys.readouterr().out
    # a second demo into the same folder is refused, and the first one's files stay
    md5 = lambda: {
        str(p.relative_to(tmp_path)): hashlib.md5(p.read_bytes()).hexdigest()
        for p in tmp_path.rglob("*")
        if p.is_file()
    }
    first = md5()
    assert {"metrics.json", "model/best.pt", "model/last.pt"} <= set(first)
    again = ["demo", "--out", str(tmp_path), "--steps", "5", "--n-train", "64"]
    again += ["--n-test", "12", "--device", "cpu", "--seed", "1"]
    assert main(again) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1 and "already holds a demo" in err[0] and "--overwrite" in err[0]
    )
    assert md5() == first
    assert main(again + ["--overwrite"]) == 0  # replaced: the new run's files
    now = md5()
    assert json.loads((tmp_path / "metrics.json").read_text())["steps_done"] == 5
    assert now["model/best.pt"] != first["model/best.pt"]


def test_no_unk_keeps_unk_out_of_evaluated_captions(tmp_path, capsys):
    "`evaluate --no-unk`: a model pushed to say <unk> says it without the flag and never with it."
    from sat_tutorial.checkpoints import load_checkpoint, save_checkpoint
    from sat_tutorial.data import Vocab
    from sat_tutorial.fit import fit
    from sat_tutorial.training import scenes_config

    cfg = scenes_config(
        steps=2,
        n_train=40,
        n_val=0,
        n_test=6,
        batch_size=8,
        val_every=0,
        ckpt_every=0,
        embed_dim=8,
        hidden_dim=8,
        attention_dim=8,
        feature_dim=8,
        warmup=1,
    )
    fit(cfg, tmp_path, progress=False, log=lambda *a: None)
    ck = load_checkpoint(tmp_path / "last.pt")
    ck["model"]["L_o.bias"][Vocab.unk] += 5.0
    save_checkpoint(ck, tmp_path / "unk.pt")
    words = {}
    for flag in ([], ["--no-unk"]):
        js = tmp_path / f"e{len(flag)}.json"
        assert (
            main(
                [
                    "evaluate",
                    "--checkpoint",
                    str(tmp_path / "unk.pt"),
                    "--device",
                    "cpu",
                    "--json",
                    str(js),
                    *flag,
                ]
            )
            == 0
        )
        caps = json.loads(js.read_text())["captions"]
        words[bool(flag)] = [w for c in caps.values() for w in c.split()]
    assert "<unk>" in words[False] and words[True] and "<unk>" not in words[True]


def test_reads_flag_for_hard_attention(tmp_path, capsys, monkeypatch):
    "`evaluate --reads marginal` decodes a hard-attention checkpoint by the per-step marginal (and argmax does not); on a soft checkpoint the flag is refused."
    import sat_tutorial.hard_attention_marginal as ha
    from sat_tutorial.fit import fit
    from sat_tutorial.training import scenes_config

    calls = []
    real_step = ha.marginal_step
    monkeypatch.setattr(
        ha, "marginal_step", lambda *a: calls.append(1) or real_step(*a)
    )
    small = dict(
        steps=2,
        n_train=40,
        n_val=0,
        n_test=4,
        batch_size=8,
        val_every=0,
        ckpt_every=0,
        embed_dim=8,
        hidden_dim=8,
        attention_dim=8,
        feature_dim=8,
        warmup=1,
        grid=8,
    )
    for model in ("hard", "soft"):
        fit(
            scenes_config(model=model, **small),
            tmp_path / model,
            progress=False,
            log=lambda *a: None,
        )
    out = {}
    for reads in ("argmax", "marginal"):
        js = tmp_path / f"{reads}.json"
        assert (
            main(
                [
                    "evaluate",
                    "--checkpoint",
                    str(tmp_path / "hard" / "last.pt"),
                    "--device",
                    "cpu",
                    "--json",
                    str(js),
                    "--reads",
                    reads,
                    "--beam-size",
                    "2",
                ]
            )
            == 0
        )
        out[reads] = json.loads(js.read_text())
        assert out[reads]["reads"] == reads and len(out[reads]["captions"]) == 4
        assert (len(calls) > 0) == (reads == "marginal"), (
            reads,
            len(calls),
        )  # the flag reached the model's decoding
    assert "marginal reads" in capsys.readouterr().out
    assert (
        main(
            [
                "evaluate",
                "--checkpoint",
                str(tmp_path / "soft" / "last.pt"),
                "--device",
                "cpu",
                "--reads",
                "marginal",
            ]
        )
        == 1
    )
    assert "--reads applies to hard-attention checkpoints" in capsys.readouterr().err


def test_evaluate_several_checkpoints_as_one_ensemble(tmp_path, capsys):
    """`evaluate --checkpoint A B` decodes the two as one ensemble: A with itself captions as A alone; A with a hard-attention
    B that reads the same annotations runs and --reads reaches B; runs whose scene CNNs were trained apart, or whose
    vocabularies differ, are refused with a message naming the checkpoint."""
    from sat_tutorial.checkpoints import load_checkpoint, save_checkpoint
    from sat_tutorial.fit import fit
    from sat_tutorial.training import scenes_config

    small = dict(
        steps=2,
        n_train=40,
        n_val=0,
        n_test=5,
        batch_size=8,
        val_every=0,
        ckpt_every=0,
        embed_dim=8,
        hidden_dim=8,
        attention_dim=8,
        feature_dim=8,
        warmup=1,
        grid=8,
    )
    for model in ("soft", "hard"):
        fit(
            scenes_config(model=model, **small),
            tmp_path / model,
            progress=False,
            log=lambda *a: None,
        )
    a, b = tmp_path / "soft" / "last.pt", tmp_path / "hard" / "last.pt"
    ck_a, ck_b = load_checkpoint(a), load_checkpoint(b)
    ck_b["encoder"] = ck_a["encoder"]  # as if B had read A's frozen CNN
    save_checkpoint(ck_b, tmp_path / "b_shared.pt")

    def run(*cks, extra=()):
        js = tmp_path / "e.json"
        code = main(
            [
                "evaluate",
                "--checkpoint",
                *map(str, cks),
                "--device",
                "cpu",
                "--json",
                str(js),
                "--beam-size",
                "2",
                *extra,
            ]
        )
        return code, (json.loads(js.read_text()) if code == 0 else None)

    _, alone = run(a)
    _, twice = run(a, a)
    assert (
        twice["captions"] == alone["captions"]
        and twice["checkpoints"] == [str(a), str(a)]
        and alone["checkpoints"] == [str(a)]
    )
    code, mixed = run(a, tmp_path / "b_shared.pt", extra=["--reads", "marginal"])
    assert code == 0 and len(mixed["captions"]) == 5 and mixed["reads"] == "marginal"
    assert " + " in capsys.readouterr().out  # the progress line names both
    code, _ = run(a, b)
    assert (
        code == 1
        and f"{b} and {a} have different encoder weights" in capsys.readouterr().err
    )
    ck_v = load_checkpoint(a)
    itos = ck_v["vocab"]["itos"]
    itos[-1], itos[-2] = itos[-2], itos[-1]  # same size, other ids
    save_checkpoint(ck_v, tmp_path / "other_vocab.pt")
    code, _ = run(a, tmp_path / "other_vocab.pt")
    assert code == 1 and "another vocabulary" in capsys.readouterr().err


def tiny_run(out, **kw):
    "A quiet two-step soft-attention run on 40 scenes, written to `out`."
    from sat_tutorial.fit import fit
    from sat_tutorial.training import scenes_config

    cfg = dict(steps=2, n_train=40, n_val=0, n_test=4, batch_size=8, val_every=0)
    cfg.update(ckpt_every=0, embed_dim=8, hidden_dim=8, attention_dim=8)
    cfg.update(feature_dim=8, warmup=1, **kw)
    fit(scenes_config(**cfg), out, progress=False, log=lambda *a: None)


def test_caption_with_several_checkpoints(tmp_path, capsys, monkeypatch):
    """`caption --checkpoint A --checkpoint A` (the flag repeated, since the image files follow) decodes an ensemble of A with
    itself: both paths reach `load_ensemble`, the model decoded is a two-member `Ensemble`, its caption is A's alone, and an
    attention PNG of the members' mean α is written."""
    import numpy as np
    from PIL import Image
    import sat_tutorial.training as training
    from sat_tutorial.decoding import Ensemble
    from sat_tutorial.fit import fit
    from sat_tutorial.training import scenes_config

    loaded, real = [], training.load_ensemble

    def spy(paths, *a, **kw):
        out = real(paths, *a, **kw)
        loaded.append((list(paths), out.model.captioner))
        return out

    monkeypatch.setattr(training, "load_ensemble", spy)
    tiny_run(tmp_path, grid=8)
    img = tmp_path / "x.png"
    Image.fromarray(
        np.random.default_rng(0).integers(0, 256, (48, 48, 3), dtype=np.uint8)
    ).save(img)
    ck = str(tmp_path / "last.pt")

    def caption(*extra):
        assert (
            main(["caption", *extra, str(img), "--device", "cpu", "--beam-size", "2"])
            == 0
        )
        return capsys.readouterr().out.splitlines()[0].split("  (log p")[0]

    alone, twice = (
        caption("--checkpoint", ck),
        caption(
            "--checkpoint",
            ck,
            "--checkpoint",
            ck,
            "--attention-png",
            str(tmp_path / "a.png"),
        ),
    )
    assert alone.startswith(f"{img}: ") and twice == alone
    assert loaded[0][0] == [ck] and not isinstance(loaded[0][1], Ensemble)
    assert (
        loaded[1][0] == [ck, ck]
        and isinstance(loaded[1][1], Ensemble)
        and len(loaded[1][1].members) == 2
    )
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"


def test_length_norm_flag_reaches_beam_search(tmp_path, monkeypatch, capsys):
    "`evaluate --length-norm γ` hands γ to beam search and records it in the JSON; a negative γ is refused by the parser."
    import sat_tutorial.decoding as dec
    from sat_tutorial.fit import fit
    from sat_tutorial.training import scenes_config

    seen = []
    real = dec.beam_search
    monkeypatch.setattr(
        dec,
        "beam_search",
        lambda *a, **kw: seen.append(kw.get("length_norm")) or real(*a, **kw),
    )
    tiny_run(tmp_path)
    for gamma in ("0", "0.7"):
        js = tmp_path / f"e{gamma}.json"
        assert (
            main(
                [
                    "evaluate",
                    "--checkpoint",
                    str(tmp_path / "last.pt"),
                    "--device",
                    "cpu",
                    "--json",
                    str(js),
                    "--beam-size",
                    "2",
                    "--length-norm",
                    gamma,
                ]
            )
            == 0
        )
        assert json.loads(js.read_text())["length_norm"] == float(gamma)
    assert seen and set(seen) == {0.0, 0.7}, seen
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(
            ["evaluate", "--checkpoint", "x.pt", "--length-norm", "-1"]
        )
    assert e.value.code == 2 and "must be 0 or more" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(
            ["caption", "--checkpoint", "x.pt", "a.jpg", "--length-norm", "mean"]
        )
    assert (
        e.value.code == 2
        and "must be a number 0 or more, not 'mean'" in capsys.readouterr().err
    )


def test_scst_sampler_flags_reach_the_config():
    "--scst-temperature and --no-scst-dropout (a bool flag that is on by default) arrive in TrainConfig; left out, the defaults hold."
    from sat_tutorial.cli import config_from_args

    base = ["train", "--out", "x", "--model", "soft", "--data", "scenes", "--scst"]
    cfg = config_from_args(
        build_parser().parse_args(
            base + ["--scst-temperature", "0.5", "--no-scst-dropout"]
        )
    )
    assert (cfg.scst_temperature, cfg.scst_dropout) == (0.5, False)
    cfg = config_from_args(build_parser().parse_args(base))
    assert (cfg.scst_temperature, cfg.scst_dropout) == (1.0, True)


def test_amp_dtype_flag(capsys):
    "--amp alone is auto; --amp-dtype fp16 turns --amp on; an unknown type is a usage error that lists the choices."
    from sat_tutorial.cli import config_from_args

    base = ["train", "--out", "x", "--model", "soft", "--data", "scenes"]
    cfg = config_from_args(build_parser().parse_args(base + ["--amp"]))
    assert (cfg.amp, cfg.amp_dtype) == (True, "auto")
    cfg = config_from_args(build_parser().parse_args(base + ["--amp-dtype", "fp16"]))
    assert (cfg.amp, cfg.amp_dtype) == (True, "fp16")
    cfg = config_from_args(build_parser().parse_args(base))
    assert (cfg.amp, cfg.amp_dtype) == (False, "auto")
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(base + ["--amp-dtype", "half"])
    assert (
        e.value.code == 2
        and "choose from 'auto', 'bf16', 'fp16'" in capsys.readouterr().err
    )
