"""A captioner's run, start to finish (issue 59): `--resume` continues with the run's own
settings (the flags given may change only how long and how often it runs), config.json
is written with the run's first checkpoint, and an exploding update stops the run in
one line naming its step, before anything saves its weights."""

import json

import torch

from test_hostile import check_one_line, tiny_flags
from test_lifecycle_matrix import md5s
from test_lifecycle_matrix import run as train


def test_resume_takes_the_runs_settings_and_records_what_it_changes(tmp_path, capsys):
    run = tmp_path / "run"
    first = ["train", "--out", run, *tiny_flags(steps=2), "--lr", "0.01"]
    assert train(first, capsys)[0] == 0
    assert json.loads((run / "config.json").read_text())["steps"] == 2
    code, out, err = train(["train", "--out", run, "--resume", "--steps", "3"], capsys)
    assert code == 0, err
    ck = torch.load(run / "last.pt", weights_only=True)
    assert ck["step"] == 3  # the run's sizes and data, its rate, one more step
    assert (ck["config"]["lr"], ck["config"]["hidden_dim"]) == (0.01, 8)
    assert json.loads((run / "config.json").read_text())["steps"] == 3  # recorded


def test_resume_refuses_a_changed_setting_and_changes_nothing(tmp_path, capsys):
    run = tmp_path / "run"
    assert train(["train", "--out", run, *tiny_flags(steps=2)], capsys)[0] == 0
    before = md5s(run)
    argv = ["train", "--out", run, "--resume", "--steps", "3", "--lr", "1e-5"]
    code, out, err = train(argv, capsys)
    check_one_line(code, out, err, 1, "this run changes lr=1e-05 (the run has 0.002)")
    assert md5s(run) == before


def test_an_exploding_update_stops_the_run_and_keeps_the_earlier_one(tmp_path, capsys):
    """--lr 10 (the flag's bound) explodes at its first step: one line naming it, and
    an --overwrite that fails so leaves the earlier run as it was, config.json too."""
    run = tmp_path / "run"
    assert train(["train", "--out", run, *tiny_flags(steps=2)], capsys)[0] == 0
    before = md5s(run)
    argv = ["train", "--out", run, *tiny_flags(steps=2), "--lr", "10", "--overwrite"]
    code, out, err = train(argv, capsys)
    check_one_line(code, out, err, 1, "step 1: one update multiplied the weights' norm")
    assert "no checkpoint was written yet" in err
    assert md5s(run) == before
