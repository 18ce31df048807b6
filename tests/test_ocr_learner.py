"""`ocr train` through the Learner (issue 50): the output folder checked before any
image is rendered, a NaN loss stopping with one line, exact resume after Ctrl-C, the
size bounds in the CLI and the API, --time-budget in minutes, the run file's kind."""

import collections, os, signal
from pathlib import Path

import pytest
import torch

from sat_tutorial import ocr_training
from fakes import BAD_OUTS, bad_out, minute_clock, one_line, rate_recorder
from sat_tutorial.cli import main
from sat_tutorial.core import InputError
from sat_tutorial.checkpoints import load_checkpoint
from sat_tutorial.learner import Callback, Clock, Interrupted
from sat_tutorial.ocr import OCRConfig
from sat_tutorial.ocr_training import load_ocr, train_ocr
from sat_tutorial.run_folder import LOCK_NAME

TINY = dict(
    channels=8,
    feature_dim=16,
    embed_dim=8,
    hidden_dim=16,
    attention_dim=8,
    n_train=48,
    n_test=8,
    batch_size=8,
)
TINY_FLAGS = "--n-train 48 --n-test 8 --channels 8 --feature-dim 16 --hidden-dim 16"
TINY_FLAGS = [*TINY_FLAGS.split(), "--batch-size", "8", "--quiet", "--device", "cpu"]


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.mark.parametrize("where", BAD_OUTS)
def test_bad_out_is_refused_before_rendering(tmp_path, capsys, monkeypatch, where):
    out, earlier, why = bad_out(tmp_path, monkeypatch, where, "ocr.pt")

    def no_images(cfg):
        raise AssertionError("images were rendered before --out was checked")

    monkeypatch.setattr(ocr_training, "_datasets", no_images)
    code = main(["ocr", "train", "--steps", "2", "--out", str(out), *TINY_FLAGS])
    assert code == 1
    one_line(capsys, "--out", why)
    assert earlier.read_bytes() == b"an earlier run"


def test_nan_loss_stops_with_one_line(tmp_path, capsys, monkeypatch):
    real, calls = ocr_training.char_objective, []

    def poisoned(model, device):
        objective = real(model, device)

        def nan_at_3(learn, batch):
            loss, stats = objective(learn, batch)
            calls.append(1)
            return (loss * float("nan") if len(calls) == 3 else loss), stats

        return nan_at_3

    monkeypatch.setattr(ocr_training, "char_objective", poisoned)
    out = tmp_path / "run"
    argv = ["ocr", "train", "--steps", "5", "--out", str(out), *TINY_FLAGS]
    assert main(argv) == 1 and len(calls) == 3
    one_line(capsys, "step 3", "nan")
    assert not (out / "metrics.json").exists()


class CtrlCAt(Callback):
    phase = "inputs"

    def __init__(self, at):
        self.at = at

    def before_batch(self, learn):
        if learn.step + 1 == self.at:
            signal.raise_signal(signal.SIGINT)


def test_ctrl_c_then_resume_is_a_straight_run(tmp_path):
    cfg = OCRConfig(**TINY, steps=7)
    straight, m1 = train_ocr(cfg, tmp_path / "a", progress=False)
    with pytest.raises(Interrupted, match="step 4 saved"):
        train_ocr(cfg, tmp_path / "b", progress=False, cbs=[CtrlCAt(4)])
    assert load_checkpoint(tmp_path / "b" / "ocr.pt")["step"] == 4
    # the folder is claimed only while train_ocr runs: a command may resume it now
    assert not [p for d in "ab" for p in (tmp_path / d).glob(LOCK_NAME)]
    resumed, m2 = train_ocr(cfg, tmp_path / "b", progress=False, resume=True)
    for (k, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), k
    assert [h["loss"] for h in m1["history"]] == [h["loss"] for h in m2["history"]]
    assert m1["cer"] == m2["cer"] and m2["steps"] == 7
    run = load_ocr(tmp_path / "b" / "ocr.pt")
    assert (run.kind, run.version, run.config["steps"]) == ("ocr", 2, 7)


def test_time_budget_is_minutes_of_the_clock(tmp_path, monkeypatch):
    "A 4-minute budget at a minute a step: 4 steps, the cosine over the 4 minutes."
    monkeypatch.setattr(ocr_training, "Clock", minute_clock())
    lrs = []

    cfg = OCRConfig(**TINY, steps=1000, lr=1e-3)
    _, m = train_ocr(
        cfg, None, time_budget=4.0, progress=False, cbs=[rate_recorder(lrs)]
    )
    assert m["steps"] == 4
    want = [
        1e-3 * 0.5 * (1 + torch.cos(torch.tensor(k / 4 * torch.pi))) for k in range(4)
    ]
    assert lrs == pytest.approx([float(w) for w in want])


def test_time_budget_flag_is_minutes(monkeypatch, tmp_path):
    seen = {}

    def fake(cfg, out, **kw):
        seen.update(kw)
        return None, collections.defaultdict(int)  # every metric 0

    monkeypatch.setattr("sat_tutorial.ocr_cli.train_ocr", fake)
    argv = ["ocr", "train", "--time-budget", "1.5", "--out", str(tmp_path / "r")]
    assert main([*argv, *TINY_FLAGS]) == 0 and seen["time_budget"] == 1.5


@pytest.mark.parametrize(
    "field,value",
    [
        ("iterations", 100_000),
        ("n_train", 10**6),
        ("batch_size", 10**5),
        ("clip", -1),
        ("lr", 1e39),  # issue 59: as --lr, core.learning_rate
    ],
)
def test_the_same_bounds_in_the_api(field, value):
    """`train_ocr` from Python refuses what `ocr train` refuses, before it renders an
    image or builds the model."""
    with pytest.raises(InputError, match=field):
        train_ocr(OCRConfig(**{field: value}), None, progress=False)


def test_ctrl_c_during_the_final_evaluation_names_the_saved_model(
    tmp_path, capsys, monkeypatch
):
    """Issue 59: Ctrl-C while the trained model is being evaluated says that the model
    was saved (naming ocr.pt and its step) and how to score it, not "interrupted
    (before anything was saved)"; exit 130, ocr.pt kept, no metrics.json."""

    def ctrl_c(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(ocr_training, "evaluate_ocr", ctrl_c)
    out = tmp_path / "run"
    argv = ["ocr", "train", "--steps", "2", "--out", str(out), *TINY_FLAGS]
    capsys.readouterr()
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert "before anything was saved" not in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert f"the trained model (step 2) is saved in {out / 'ocr.pt'}" in err, err
    assert "ocr evaluate --checkpoint" in err
    assert load_checkpoint(out / "ocr.pt")["step"] == 2
    assert not (out / "metrics.json").exists()


def test_train_wall_seconds_leave_out_the_final_evaluation(tmp_path, monkeypatch):
    """Issue 59: metrics.json's train_wall_seconds and train_cpu_seconds end where
    training ends: an evaluation that takes 3 s adds nothing to them."""
    import time

    real, seen = ocr_training.evaluate_ocr, {}

    def slow(*a, **k):
        seen["start"] = time.perf_counter()
        time.sleep(3)
        return real(*a, **k)

    monkeypatch.setattr(ocr_training, "evaluate_ocr", slow)
    t0 = time.perf_counter()
    _, m = train_ocr(OCRConfig(**TINY, steps=2), None, progress=False)
    assert m["train_wall_seconds"] <= seen["start"] - t0, m["train_wall_seconds"]


def test_a_run_file_whose_sizes_are_out_of_bounds_is_refused_at_load(tmp_path):
    """The bounds moved from `OCRConfig` to the training module (14d): a run file whose
    configuration exceeds them is still one line naming the size when it is loaded,
    before a model is built."""
    train_ocr(OCRConfig(**TINY, steps=2), tmp_path / "run", progress=False)
    path = tmp_path / "run" / "ocr.pt"
    assert load_ocr(path).config["iterations"] == OCRConfig.iterations
    ck = load_checkpoint(path)
    ck["config"]["iterations"] = 100_000
    torch.save(ck, path)
    with pytest.raises(InputError, match="iterations"):
        load_ocr(path)
