"""`ram train` through the Learner (issue 50): the output folder checked before any
work, a NaN loss stopping with one line, exact resume after Ctrl-C (the early-stopping
count included), the size bounds in the CLI and the API, and --time-budget in minutes."""

import os, signal
from pathlib import Path

import numpy as np
import pytest
import torch

from sat_tutorial import ram_cli, ram_training
from fakes import BAD_OUTS, bad_out, minute_clock, one_line, rate_recorder
from sat_tutorial.cli import main
from sat_tutorial.core import InputError
from sat_tutorial.checkpoints import load_checkpoint
from sat_tutorial.learner import Callback, Clock, Interrupted, StopRun
from sat_tutorial.ram import GlimpseMNIST
from sat_tutorial.ram_training import RAMConfig, train_ram
from sat_tutorial.run_folder import LOCK_NAME


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def fake_digits(n=64, seed=1):
    rng = np.random.default_rng(seed)
    x = (rng.random((n, 28, 28)) > 0.8).astype(np.uint8) * rng.integers(
        1, 256, (n, 28, 28)
    ).astype(np.uint8)
    return x, rng.integers(0, 10, n)


def tiny(n=64, **kw):
    "A small RAM on `n` random 'digits' (train and test alike)."
    X, Y = fake_digits(n)
    cfg = RAMConfig(
        task="mnist",
        batch_size=16,
        hidden=32,
        glimpse_hidden=16,
        loc_hidden=16,
        glimpse_dim=32,
        **kw,
    )
    data = dict(
        train_data=GlimpseMNIST("mnist", "train", seed=0, images=X, labels=Y),
        test_data=GlimpseMNIST("mnist", "test", seed=1, images=X, labels=Y),
    )
    return cfg, data


def fake_mnist(monkeypatch):
    "`ram train` reads random digits instead of MNIST files."
    X, Y = fake_digits(80)

    def data(task, split="train", seed=0, limit=None, download=None, **kw):
        if "images" in kw:
            return GlimpseMNIST(task, split, seed=seed, **kw)
        return GlimpseMNIST(task, split, seed=seed, images=X, labels=Y)

    monkeypatch.setattr(ram_training, "GlimpseMNIST", data)


TINY_FLAGS = ["--batch-size", "16", "--val", "0", "--quiet", "--device", "cpu"]


@pytest.mark.parametrize("where", BAD_OUTS)
def test_bad_out_is_refused_before_any_work(tmp_path, capsys, monkeypatch, where):
    "--out a file, under a file, read-only, or holding a run: one line, no data read."
    out, earlier, why = bad_out(tmp_path, monkeypatch, where, "ram.pt")

    def no_data(*a, **k):
        raise AssertionError("data was read before --out was checked")

    monkeypatch.setattr(ram_training, "_ram_data", no_data)
    code = main(["ram", "train", "--out", str(out), *TINY_FLAGS])
    assert code == 1
    one_line(capsys, "--out", why)
    assert earlier.read_bytes() == b"an earlier run"


def test_nan_loss_stops_with_one_line_and_keeps_the_last_checkpoint(
    tmp_path, capsys, monkeypatch
):
    fake_mnist(monkeypatch)
    real, calls = ram_training.ram_loss, []

    def poisoned(out, y):  # the 6th step's loss is NaN
        L = real(out, y)
        calls.append(1)
        if len(calls) == 6:
            L["loss"] = L["loss"] * float("nan")
        return L

    monkeypatch.setattr(ram_training, "ram_loss", poisoned)
    out = tmp_path / "run"
    code = main(["ram", "train", "--steps", "9", "--out", str(out), *TINY_FLAGS])
    assert code == 1 and len(calls) == 6  # stopped at the NaN, before its update
    one_line(capsys, "step 6", "nan", str(out / "ram.pt"))
    ck = load_checkpoint(out / "ram.pt")
    assert ck["step"] == 5  # the checkpoint at the epoch's end (80 // 16 = 5 steps)
    assert all(torch.isfinite(v).all() for v in ck["model"].values())


def test_overwrite_deletes_nothing_until_the_first_checkpoint(tmp_path, monkeypatch):
    out = tmp_path / "run"
    cfg, data = tiny(steps=2)
    train_ram(cfg, out=out, **data)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    class Poison(Callback):
        phase = "inputs"  # before the guards (FiniteLoss)

        def after_loss(self, learn):
            learn.loss = learn.loss * float("nan")

    with pytest.raises(StopRun, match="step 1: the loss is nan"):
        train_ram(cfg, out=out, overwrite=True, cbs=[Poison()], **data)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    (out / "best.pt").write_bytes(b"stale")  # a file the new run does not write
    train_ram(cfg, out=out, overwrite=True, **data)
    assert not (out / "best.pt").exists() and load_checkpoint(out / "ram.pt")


class CtrlCAt(Callback):
    "Press Ctrl-C during step `at`."

    phase = "inputs"

    def __init__(self, at):
        self.at = at

    def before_batch(self, learn):
        if learn.step + 1 == self.at:
            signal.raise_signal(signal.SIGINT)


def test_ctrl_c_then_resume_is_a_straight_run(tmp_path):
    """Interrupted mid-epoch and resumed, a run with validation, early stopping and the
    annealed rate ends with the same weights, history and evaluations."""
    kw = dict(epochs=8, val=16, patience=2, anneal=True, lr=3e-2)
    cfg, data = tiny(n=80, **kw)
    straight, m1 = train_ram(cfg, out=tmp_path / "a", **data)
    assert m1["step"] < 8 * 4  # the early stop happened (4 steps an epoch)
    cfg, data = tiny(n=80, **kw)
    with pytest.raises(Interrupted, match="step 6 saved"):
        train_ram(cfg, out=tmp_path / "b", cbs=[CtrlCAt(6)], **data)
    assert load_checkpoint(tmp_path / "b" / "ram.pt")["step"] == 6
    # the folder is claimed only while train_ram runs: a command may resume it now
    assert not [p for d in "ab" for p in (tmp_path / d).glob(LOCK_NAME)]
    cfg, data = tiny(n=80, **kw)
    resumed, m2 = train_ram(cfg, out=tmp_path / "b", resume=True, **data)
    for (k, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), k  # the best weights, from before the interruption
    last_a, last_b = (load_checkpoint(tmp_path / d / "ram.pt")["model"] for d in "ab")
    for k in last_a:  # and the last ones, trained after the resume
        assert torch.equal(last_a[k], last_b[k]), k
    for key in ("step", "history", "evals", "best", "test_error", "val_error"):
        assert m1[key] == m2[key], key


def test_time_budget_is_minutes_of_the_clock(tmp_path, monkeypatch):
    "A 3-minute budget at a minute a step: 3 steps, the rate annealed by the clock."
    monkeypatch.setattr(ram_training, "Clock", minute_clock())
    lrs = []

    cfg, data = tiny(steps=1000, anneal=True)
    _, m = train_ram(
        cfg, out=tmp_path, time_budget=3.0, cbs=[rate_recorder(lrs)], **data
    )
    assert m["step"] == 3 and (tmp_path / "ram.pt").exists()
    assert lrs == pytest.approx([1e-3, 1e-3 * 2 / 3, 1e-3 / 3])


def test_time_budget_flag_is_minutes(monkeypatch, tmp_path):
    seen = {}

    def fake(cfg, **kw):
        seen.update(kw)
        return None, {"step": 0, "test_error": None}

    monkeypatch.setattr(ram_cli, "train_ram", fake)  # what `ram train` calls
    out = tmp_path / "run"
    argv = ["ram", "train", "--time-budget", "2.5", "--out", str(out), *TINY_FLAGS]
    assert main(argv) == 0 and seen["time_budget"] == 2.5


@pytest.mark.parametrize(
    "flag,value",
    [
        ("--batch-size", "4097"),
        ("--steps", "10000001"),
        ("--epochs", "10001"),
        ("--glimpses", "65"),
        ("--patch", "129"),
        ("--scales", "7"),
        ("--limit", "60001"),
        ("--val", "60000"),
        ("--patience", "10001"),
    ],
)
def test_size_flags_have_upper_bounds(tmp_path, capsys, flag, value):
    try:
        code = main(["ram", "train", f"{flag}={value}", "--out", str(tmp_path / "r")])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]  # argparse's usage, then the error
    assert code == 2 and flag in line and value in line and "Traceback" not in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "field,value",
    [
        ("batch_size", 4097),
        ("steps", 10**8),
        ("glimpses", 65),
        ("hidden", 10**6),
        ("limit", 0),
        ("lr", 1e39),  # issue 59: as --lr, core.learning_rate
        ("lr", 0.0),
    ],
)
def test_the_same_bounds_in_the_api(field, value):
    with pytest.raises(InputError, match=field):
        RAMConfig(**{field: value})


def test_lr_is_one_rule_in_every_family():
    """Issue 59: --lr of train, ram train, draw train and ocr train and the Python
    configurations share core.learning_rate, not copies of it."""
    from sat_tutorial.cli import build_parser
    from sat_tutorial.ranges import learning_rate
    from sat_tutorial.ocr_training import OCR_BOUNDS
    from sat_tutorial.ram_training import RAM_BOUNDS
    from sat_tutorial.training import CONFIG_RANGES

    assert RAM_BOUNDS["lr"] is OCR_BOUNDS["lr"] is CONFIG_RANGES["lr"] is learning_rate
    top = build_parser()._subparsers._group_actions[0].choices

    def lr_type(p):
        return next(a.type for a in p._actions if a.dest == "lr")

    family = {
        f: top[f]._subparsers._group_actions[0].choices["train"]
        for f in "ram draw ocr".split()
    }
    assert all(lr_type(p) is learning_rate for p in [top["train"], *family.values()])


class StepStats(Callback):
    "Every step's statistics, as the Learner reports them."

    phase = "evaluate"

    def __init__(self):
        self.steps = []

    def after_step(self, learn):
        self.steps.append(dict(learn.stats))


@pytest.mark.parametrize("end", ["time_budget", "early_stop"])
def test_the_history_keeps_the_last_steps_of_a_run_that_ends_early(tmp_path, end):
    """A run ended by its time budget (3 steps at a minute a step) or by early stopping,
    before the history's first 50-step entry: the history (returned and in
    metrics.json) ends on the last step, with the means of the steps since the entry
    before."""
    import json

    stats = StepStats()
    if end == "time_budget":
        cfg, data = tiny(steps=1000)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(ram_training, "Clock", minute_clock())
            _, m = train_ram(cfg, out=tmp_path, time_budget=3.0, cbs=[stats], **data)
        assert m["step"] == 3
    else:
        cfg, data = tiny(n=80, epochs=8, val=16, patience=2, anneal=True, lr=3e-2)
        _, m = train_ram(cfg, out=tmp_path, cbs=[stats], **data)
        assert m["step"] < 8 * 4  # stopped early (4 steps an epoch)
    assert len(stats.steps) == m["step"] < 50
    means = {k: sum(s[k] for s in stats.steps) / m["step"] for k in stats.steps[0]}
    assert m["history"] == [pytest.approx({"step": m["step"], **means})]
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert written["history"] == m["history"]
