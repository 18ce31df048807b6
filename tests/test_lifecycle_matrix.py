"""The run lifecycle of every training family, case by case (issue 59): four families
(the captioners' `train`, `ram train`, `draw train`, `ocr train`) × a bad --out,
--resume with no run, a folder another live run holds, NaN at step k, kill -9 during a
checkpoint write, Ctrl-C during training and during the final evaluation, a full disk,
an --overwrite whose run fails before its first checkpoint, and a --resume given
another learning rate. Each cell asserts the exit status, one line naming the problem
(no traceback), and the md5 of every file that was there before."""

import hashlib
import os
import signal
import socket

import pytest
import torch

from sat_tutorial import learner
from sat_tutorial.cli import main
from sat_tutorial.checkpoints import TEMP_SUFFIX
from sat_tutorial.runs import load_run
from test_draw_cli import TINY_DRAW
from test_hostile import deadline, tiny_flags
from test_ocr_learner import TINY_FLAGS

FAMILIES = {  # the command without --out, and the checkpoint it continues from
    "captioner": (["train", *tiny_flags(steps=3), "--ckpt-every", "1"], "last.pt"),
    "ram": (
        ["ram", "train", "--steps", "3", "--limit", "100", "--val", "20", "--quiet"],
        "ram.pt",
    ),
    "draw": (
        ["draw", "train", *TINY_DRAW, "--steps", "3", "--checkpoint-every", "1"],
        "checkpoint.pt",
    ),
    "ocr": (["ocr", "train", "--steps", "3", *TINY_FLAGS], "ocr.pt"),
}
LIMIT_S = 180


def md5s(folder) -> dict:
    return {
        p.name: hashlib.md5(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name != ".sat-lock"
    }


def run(argv, capsys) -> tuple:
    capsys.readouterr()
    with deadline(LIMIT_S):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:
            code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def one_line(code, err, want_code, *needles):
    assert code == want_code, (code, err)
    assert "Traceback" not in err, err
    pieces = err.replace("\r", "\n").splitlines()  # the progress bar's too
    lines = [line for line in pieces if line.strip() and "%|" not in line]
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], (n, lines[0])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    "One finished run of each family, copied by the cases that need an earlier run."
    home = tmp_path_factory.mktemp("runs")
    for fam, (argv, _) in FAMILIES.items():
        with deadline(LIMIT_S):
            assert main([*argv, "--out", str(home / fam)]) == 0, fam
    return home


def earlier_run(runs, fam, tmp_path):
    import shutil

    out = tmp_path / "run"
    shutil.copytree(runs / fam, out)
    (out / ".sat-lock").unlink(missing_ok=True)
    return out, md5s(out)


def poison_step(monkeypatch, k: int):
    "Every Learner's objective gives a NaN loss at step k."
    init = learner.Learner.__init__

    def poisoned_init(self, opt, objective, *a, **kw):
        def bad(learn, batch):
            loss, stats = objective(learn, batch)
            return (loss * float("nan") if learn.step + 1 == k else loss), stats

        init(self, opt, bad, *a, **kw)

    monkeypatch.setattr(learner.Learner, "__init__", poisoned_init)


@pytest.mark.parametrize("fam", list(FAMILIES))
def test_bad_out(fam, tmp_path, capsys):
    (tmp_path / "a-file").write_text("x")
    code, out, err = run([*FAMILIES[fam][0], "--out", tmp_path / "a-file"], capsys)
    one_line(code, err, 1, "a-file is a file")
    assert (tmp_path / "a-file").read_text() == "x"


@pytest.mark.parametrize("fam", list(FAMILIES))
def test_resume_with_no_run(fam, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    argv = [*FAMILIES[fam][0], "--out", tmp_path / "empty", "--resume"]
    code, out, err = run(argv, capsys)
    one_line(code, err, 1, "no run to resume")
    assert md5s(tmp_path / "empty") == {}


@pytest.mark.parametrize("fam", list(FAMILIES))
def test_a_folder_another_live_run_holds(fam, runs, tmp_path, capsys):
    out, before = earlier_run(runs, fam, tmp_path)
    host = socket.gethostname()
    (out / ".sat-lock").write_text(f"{os.getppid()} {host}\n")  # a live process's
    code, _, err = run([*FAMILIES[fam][0], "--out", out, "--overwrite"], capsys)
    one_line(code, err, 1, f"is in use by process {os.getppid()} on {host}")
    assert md5s(out) == before


@pytest.mark.parametrize("fam", list(FAMILIES))
def test_nan_at_step_k_keeps_what_was_written(fam, tmp_path, capsys, monkeypatch):
    poison_step(monkeypatch, 3)
    out = tmp_path / "run"
    code, _, err = run([*FAMILIES[fam][0], "--out", out], capsys)
    one_line(code, err, 1, "step 3: the loss is nan; stopped (")
    last = out / FAMILIES[fam][1]
    if last.exists():  # written every step: the one of step 2, named in the message
        assert "(step 2), is kept" in err
        assert load_run(last).checkpoint["step"] == 2
    else:
        assert "no checkpoint was written yet" in err


@pytest.mark.parametrize("fam", list(FAMILIES))
def test_kill_9_during_a_save_then_resume(fam, runs, tmp_path, capsys):
    """What a write killed mid-way leaves (a temp file beside the checkpoint) is
    removed by the next run, which resumes from the intact checkpoint."""
    out, before = earlier_run(runs, fam, tmp_path)
    name = FAMILIES[fam][1]
    stale = out / f".{name}.99999-k1ll9{TEMP_SUFFIX}"
    stale.write_bytes(b"half a checkpoint")
    # argparse takes the last --steps
    argv = [*FAMILIES[fam][0], "--out", out, "--resume", "--steps", "4"]
    code, _, err = run(argv, capsys)
    assert code == 0, err
    assert not stale.exists()
    assert load_run(out / name).checkpoint["step"] == 4


@pytest.mark.parametrize("fam", list(FAMILIES))
def test_ctrl_c_during_training(fam, tmp_path, capsys, monkeypatch):
    init = learner.Learner.__init__

    def pressing_init(self, opt, objective, *a, **kw):
        def press(learn, batch):
            if learn.step + 1 == 2:
                signal.raise_signal(signal.SIGINT)
            return objective(learn, batch)

        init(self, opt, press, *a, **kw)

    monkeypatch.setattr(learner.Learner, "__init__", pressing_init)
    out = tmp_path / "run"
    code, _, err = run([*FAMILIES[fam][0], "--out", out], capsys)
    one_line(code, err, 130, "step 2 saved in", FAMILIES[fam][1], "--resume")
    monkeypatch.setattr(learner.Learner, "__init__", init)
    code, _, err = run([*FAMILIES[fam][0], "--out", out, "--resume"], capsys)
    assert code == 0, err


FINAL_EVALUATION = {  # the function each command scores its trained model with
    "captioner": ("sat_tutorial.training", "evaluate", ["--evaluate"]),
    "ram": ("sat_tutorial.ram_training", "evaluate_ram", []),
    "draw": ("sat_tutorial.draw_cli", "evaluate_draw", []),
    "ocr": ("sat_tutorial.ocr_training", "evaluate_ocr", []),
}


@pytest.mark.parametrize("fam", list(FAMILIES))
def test_ctrl_c_during_the_final_evaluation(fam, tmp_path, capsys, monkeypatch):
    """After the last step is saved: the message says the trained model is saved and
    names its file, never "before anything was saved"."""
    import importlib

    module, name, extra = FINAL_EVALUATION[fam]
    real = getattr(importlib.import_module(module), name)

    def press(*a, **kw):  # once the last step is saved (not in a validation before)
        if (learner.Checkpoint.written or (None, 0))[1] == 3:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(importlib.import_module(module), name, press)
    out = tmp_path / "run"
    code, _, err = run([*FAMILIES[fam][0], *extra, "--out", out], capsys)
    one_line(code, err, 130, "interrupted", "(step 3)", FAMILIES[fam][1])
    assert "before anything was saved" not in err


@pytest.mark.parametrize("fam", list(FAMILIES))
def test_a_full_disk(fam, runs, tmp_path, capsys, monkeypatch):
    out, before = earlier_run(runs, fam, tmp_path)
    full = RuntimeError(
        "PytorchStreamWriter failed writing file data/0: file write failed"
    )

    def no_space(*a, **kw):
        raise full

    monkeypatch.setattr(torch, "save", no_space)
    code, _, err = run([*FAMILIES[fam][0], "--out", out, "--overwrite"], capsys)
    one_line(code, err, 1, "could not write", "disk full?")
    assert md5s(out) == before


@pytest.mark.parametrize("fam", list(FAMILIES))
def test_overwrite_whose_run_fails_before_its_first_checkpoint(
    fam, runs, tmp_path, capsys, monkeypatch
):
    out, before = earlier_run(runs, fam, tmp_path)
    poison_step(monkeypatch, 1)
    code, _, err = run([*FAMILIES[fam][0], "--out", out, "--overwrite"], capsys)
    one_line(code, err, 1, "step 1: the loss is nan", "no checkpoint was written yet")
    assert md5s(out) == before


CHANGED = {  # how each family refuses a resume given another rate
    "captioner": "this run changes lr=0.5 (the run has 0.002)",
    "ram": "was trained with a different configuration",
    "draw": "this run changes lr=0.5 (the run has 0.001)",
    "ocr": "was trained with another configuration",
}


@pytest.mark.parametrize("fam", list(FAMILIES))
def test_resume_with_another_rate_is_refused(fam, runs, tmp_path, capsys):
    """`--resume --lr 0.5`: refused in one line, never taken silently (DRAW's and the
    captioners' took it, kept the old rate and recorded the new one)."""
    out, before = earlier_run(runs, fam, tmp_path)
    argv = [*FAMILIES[fam][0], "--out", out, "--resume", "--lr", "0.5", "--steps", "4"]
    code, _, err = run(argv, capsys)
    one_line(code, err, 1, CHANGED[fam])
    assert md5s(out) == before


@pytest.mark.parametrize("fam", list(FAMILIES))
def test_ctrl_c_before_the_first_step(fam, tmp_path, capsys, monkeypatch):
    "While the data loads, before anything is written: said so, exit 130."

    def press(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(learner.Learner, "fit", press)
    code, _, err = run([*FAMILIES[fam][0], "--out", tmp_path / "run"], capsys)
    one_line(code, err, 130, "interrupted (before anything was saved)")
    assert not (tmp_path / "run" / FAMILIES[fam][1]).exists()
