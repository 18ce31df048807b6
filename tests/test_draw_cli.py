"""`sat-tutorial draw ...` against input it must refuse (test_hostile.py's manner): the exit status, one line `… error: …`
naming the culprit, no traceback, and nothing already on disk changed. A captioner checkpoint given to `draw sample` is
named as not a DRAW checkpoint; `draw train --out` into a folder that holds a run is refused unless --resume or
--overwrite."""

import hashlib, json
from pathlib import Path

import pytest
import torch

from sat_tutorial.cli import main
from sat_tutorial.core import data_root
from sat_tutorial.checkpoints import load_checkpoint, save_checkpoint
from test_hostile import tiny_flags

HAVE_FIXED = (data_root() / "binarized_mnist" / "binarized_mnist_test.amat.gz").exists()
needs_fixed = pytest.mark.skipif(
    not HAVE_FIXED, reason="binarized_mnist/*.amat.gz not found under SAT_TUTORIAL_DATA"
)
TINY_DRAW = [
    "-T",
    "2",
    "--hidden",
    "8",
    "--z-dim",
    "2",
    "--read-n",
    "2",
    "--write-n",
    "3",
    "--device",
    "cpu",
    "--batch-size",
    "16",
    "--steps",
    "2",
]
TINY_CAPTIONER = tiny_flags(steps=1, n_train=16, n_test=2)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    "A captioner run written by `sat-tutorial train`, a RAM-format checkpoint, and a folder holding a DRAW run."
    w = tmp_path_factory.mktemp("draw_cli")
    assert main(["train", "--out", str(w / "captioner"), *TINY_CAPTIONER]) == 0
    save_checkpoint(
        {
            "format": "sat_tutorial.ram/1",
            "config": {"task": "mnist"},
            "model": {},
            "step": 1,
        },
        w / "ram.pt",
    )
    run = w / "drawrun"
    run.mkdir()
    save_checkpoint(
        {"format": "sat_tutorial.draw/1", "model": {}, "config": {}, "step": 7},
        run / "checkpoint.pt",
    )
    (run / "metrics.json").write_text(json.dumps({"steps": 7}))
    (w / "afile").write_text("a file where a folder should be")
    return w


def snapshot(root: Path) -> dict:
    return {
        p: hashlib.sha1(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file()
    }


def refused(argv, world, capsys, culprit, code=1):
    "Run `sat-tutorial argv`; assert the exit status, one error line naming `culprit`, no traceback, and no file changed."
    before = snapshot(world)
    capsys.readouterr()
    try:
        rc = main([a.replace("{w}", str(world)) for a in argv])
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    assert rc == code, (rc, out, err)
    assert "Traceback" not in out + err, err
    lines = [l for l in err.splitlines() if "error:" in l]
    assert len(lines) == 1, err
    assert culprit.replace("{w}", str(world)) in lines[0], (culprit, lines[0])
    after = snapshot(world)
    assert after == before, (
        f"files changed: {[str(p) for p in set(before) | set(after) if before.get(p) != after.get(p)]}"
    )
    return lines[0]


def test_sample_refuses_a_captioner_checkpoint(world, capsys):
    line = refused(
        [
            "draw",
            "sample",
            "--checkpoint",
            "{w}/captioner/best.pt",
            "--out",
            "{w}/s.png",
        ],
        world,
        capsys,
        "{w}/captioner/best.pt is a captioner run, not a draw run",
    )
    assert "checkpoint.pt written by" in line and not (world / "s.png").exists()


def test_sample_refuses_other_checkpoints(world, capsys):
    refused(
        ["draw", "sample", "--checkpoint", "{w}/ram.pt", "--out", "{w}/s.png"],
        world,
        capsys,
        "ram.pt is a ram run, not a draw run",
    )
    refused(
        ["draw", "sample", "--checkpoint", "{w}/afile", "--out", "{w}/s.png"],
        world,
        capsys,
        "afile could not be loaded",
    )
    refused(
        ["draw", "sample", "--checkpoint", "{w}/none.pt", "--out", "{w}/s.png"],
        world,
        capsys,
        "none.pt does not exist",
    )


def test_train_into_a_run_refuses(world, capsys):
    line = refused(
        ["draw", "train", *TINY_DRAW, "--out", "{w}/drawrun"],
        world,
        capsys,
        "--out {w}/drawrun already holds a run",
    )
    assert "--resume" in line and "--overwrite" in line and "checkpoint.pt" in line


def test_train_resume_and_overwrite_together(world, capsys):
    refused(
        [
            "draw",
            "train",
            *TINY_DRAW,
            "--out",
            "{w}/drawrun",
            "--resume",
            "--overwrite",
        ],
        world,
        capsys,
        "--overwrite",
    )


def test_train_out_is_a_file(world, capsys):
    refused(
        ["draw", "train", *TINY_DRAW, "--out", "{w}/afile"],
        world,
        capsys,
        "--out {w}/afile is a file",
    )


def test_overwrite_refused_by_its_data_keeps_the_old_run(
    world, capsys, monkeypatch, tmp_path
):
    monkeypatch.setenv("SAT_TUTORIAL_DATA", str(tmp_path))  # no data at all
    refused(
        [
            "draw",
            "train",
            *TINY_DRAW,
            "--binarization",
            "fixed",  # with "auto" the stand-in would stand in
            "--out",
            "{w}/drawrun",
            "--overwrite",
        ],
        world,
        capsys,
        "binarized_mnist",
    )


@needs_fixed
def test_overwrite_replaces_and_resume_continues(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["draw", "train", *TINY_DRAW, "--out", str(run)]) == 0
    assert load_checkpoint(run / "checkpoint.pt")["step"] == 2
    assert (
        main(["draw", "train", *TINY_DRAW[:-1], "3", "--out", str(run), "--resume"])
        == 0
    )  # continues: 2 -> 3
    assert (
        load_checkpoint(run / "checkpoint.pt")["step"] == 3
        and "resuming from" in capsys.readouterr().out
    )
    assert (
        main(
            [
                "draw",
                "train",
                *TINY_DRAW,
                "--out",
                str(run),
                "--overwrite",
                "--seed",
                "1",
            ]
        )
        == 0
    )
    assert (
        "--overwrite: deleted the earlier run's checkpoint.pt, metrics.json"
        in capsys.readouterr().out
    )
    ck = load_checkpoint(run / "checkpoint.pt")
    assert (
        ck["step"] == 2
        and ck["seed"] == 1
        and json.loads((run / "metrics.json").read_text())["seed"] == 1
    )
    assert (
        main(
            [
                "draw",
                "sample",
                "--checkpoint",
                str(run / "checkpoint.pt"),
                "--n",
                "2",
                "--out",
                str(tmp_path / "s.png"),
            ]
        )
        == 0
    )
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_old_draw_checkpoint_without_a_format_tag_still_loads(tmp_path):
    from sat_tutorial.draw import DRAW
    from sat_tutorial.draw_training import load_draw

    m = DRAW(T=2, read_n=2, write_n=3, z_dim=2, hidden=8)
    save_checkpoint(
        {"model": m.state_dict(), "config": m.config, "step": 5}, tmp_path / "old.pt"
    )  # written before the tag
    rec = load_draw(tmp_path / "old.pt")
    loaded, ck = rec.model, rec.checkpoint
    assert (rec.kind, rec.version) == ("draw", 1)
    assert ck["step"] == 5 and all(
        torch.equal(a, b)
        for a, b in zip(loaded.state_dict().values(), m.state_dict().values())
    )
    save_checkpoint(
        {"model": {}, "config": dict(m.config, hidden=9), "step": 5},
        tmp_path / "bad.pt",
    )
    with pytest.raises(ValueError, match="bad.pt: not a complete draw run, or weights"):
        load_draw(tmp_path / "bad.pt")


def test_resume_needs_a_run(world, capsys):
    refused(
        ["draw", "train", *TINY_DRAW, "--out", "{w}/norun", "--resume"],
        world,
        capsys,
        "--resume: {w}/norun holds no run to resume (no checkpoint.pt)",
    )


@needs_fixed
def test_ctrl_c_saves_the_step_and_resume_continues_exactly(
    tmp_path, capsys, monkeypatch
):
    """Ctrl-C during step 3 of 4: the Learner finishes the step, the checkpoint holds it,
    the command says where and exits 130 without metrics; --resume then reaches the
    same weights and losses as a run that was never interrupted."""
    import os, signal
    import sat_tutorial.draw_training as dt

    four = [*TINY_DRAW[:-1], "4"]
    straight, cut = tmp_path / "straight", tmp_path / "cut"
    assert main(["draw", "train", *four, "--out", str(straight)]) == 0
    real = dt.batch_indices

    def ctrl_c_in_step_3(n, batch_size, step, seed=0):
        if step == 2:  # the batch of the third step: Ctrl-C while it trains
            os.kill(os.getpid(), signal.SIGINT)
        return real(n, batch_size, step, seed)

    monkeypatch.setattr(dt, "batch_indices", ctrl_c_in_step_3)
    capsys.readouterr()
    assert main(["draw", "train", *four, "--out", str(cut)]) == 130
    err = capsys.readouterr().err
    assert f"interrupted: step 3 saved in {cut / 'checkpoint.pt'}" in err, err
    assert "--resume continues" in err and "Traceback" not in err
    assert load_checkpoint(cut / "checkpoint.pt")["step"] == 3
    assert not (cut / "metrics.json").exists()
    monkeypatch.undo()
    assert main(["draw", "train", *four, "--out", str(cut), "--resume"]) == 0
    a = load_checkpoint(straight / "checkpoint.pt")
    b = load_checkpoint(cut / "checkpoint.pt")
    assert a["step"] == b["step"] == 4 and a["losses"] == b["losses"]
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


@needs_fixed
def test_time_budget_is_minutes_of_the_learners_clock(tmp_path, monkeypatch):
    "A clock that advances half a minute per reading: a 2-minute budget ends the run early."
    import sat_tutorial.learner as learner

    class HalfMinutes:
        t = 0.0

        @classmethod
        def perf_counter(cls):
            cls.t += 30.0
            return cls.t

    monkeypatch.setattr(learner, "time", HalfMinutes)
    run = tmp_path / "run"
    argv = [*TINY_DRAW[:-1], "10", "--time-budget", "2", "--out", str(run)]
    assert main(["draw", "train", *argv]) == 0
    ck = load_checkpoint(run / "checkpoint.pt")
    met = json.loads((run / "metrics.json").read_text())
    assert 1 <= ck["step"] < 10 and met["steps"] == ck["step"]
    assert met["planned_steps"] == 10 and ck["minutes"] >= 2


@needs_fixed
def test_ctrl_c_during_the_final_evaluation_names_the_saved_checkpoint(
    tmp_path, capsys, monkeypatch
):
    """Issue 59: Ctrl-C while the trained model is evaluated says that checkpoint.pt
    holds it (its step named), not "interrupted (before anything was saved)"."""
    import sat_tutorial.draw_cli as dc

    def ctrl_c(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(dc, "evaluate_draw", ctrl_c)
    run = tmp_path / "run"
    capsys.readouterr()
    assert main(["draw", "train", *TINY_DRAW, "--out", str(run)]) == 130
    err = capsys.readouterr().err
    assert "before anything was saved" not in err and "Traceback" not in err
    assert [l.startswith("sat-tutorial:") for l in err.splitlines()].count(True) == 1
    ck = run / "checkpoint.pt"
    assert f"the trained model (step 2) is saved in {ck}" in err, err
    assert load_checkpoint(ck)["step"] == 2 and not (run / "metrics.json").exists()
