"""The run format (notebook 12f): the registry, save_run/load_run round trips, and the
one-line refusals: another kind, an unknown kind, a newer version, NaN weights, weights
that do not fit, a failed write; the flags every training command shares, and the lock
a run takes on its folder (a second process refused by name, a killed run's lock taken
over)."""

import argparse, os, subprocess, sys

import pytest
import torch
import torch.nn as nn

from sat_tutorial import runs
from sat_tutorial.core import InputError
from sat_tutorial.checkpoints import load_checkpoint, save_checkpoint
from sat_tutorial.learner import StopRun
from sat_tutorial.runs import (
    KINDS,
    format_tag,
    kind_of,
    load_run,
    parse_tag,
    register_kind,
    save_run,
)
from sat_tutorial.run_folder import add_run_flags, check_run_flags


@pytest.fixture
def toy():
    "A kind registered for one test: a linear layer whose config holds its sizes."
    k = register_kind(
        "toytest",
        2,
        lambda cfg, ck: nn.Linear(cfg["n_in"], cfg["n_out"]),
        untagged=True,
    )
    yield k
    del KINDS["toytest"]


def test_tags_round_trip_and_refuse_anything_else():
    assert parse_tag(format_tag("ram", 3)) == ("ram", 3)
    for bad in (None, {}, "sat_tutorial.ram", "sat_tutorial.ram/x", "x.ram/1"):
        assert parse_tag(bad) is None


def test_registry(toy):
    assert kind_of("toytest") is toy and toy.version == 2
    assert kind_of("no_such") is None
    with pytest.raises(ValueError, match="lower-case name"):
        register_kind("Bad Name", 1, None)
    with pytest.raises(ValueError, match="no run kind 'no_such'"):
        save_run("x.pt", "no_such", nn.Linear(1, 1), {})


def test_round_trip(toy, tmp_path):
    net = nn.Linear(3, 2)
    save_run(tmp_path / "a.pt", "toytest", net, {"n_in": 3, "n_out": 2}, step=4)
    rec = load_run(tmp_path / "a.pt", "toytest")
    assert (rec.kind, rec.version, rec.config) == (
        "toytest",
        2,
        {"n_in": 3, "n_out": 2},
    )
    assert rec.checkpoint["format"] == "sat_tutorial.toytest/2"
    assert rec.checkpoint["step"] == 4 and rec.path == tmp_path / "a.pt"
    assert not rec.model.training
    assert all(
        torch.equal(a, b) for a, b in zip(rec.model.parameters(), net.parameters())
    )


def test_an_untagged_file_is_version_1_only_when_its_kind_is_asked(toy, tmp_path):
    net = nn.Linear(2, 2)
    save_checkpoint(
        {"model": net.state_dict(), "config": {"n_in": 2, "n_out": 2}},
        tmp_path / "old.pt",
    )
    assert load_run(tmp_path / "old.pt", "toytest").version == 1
    with pytest.raises(InputError, match="old.pt is not a sat_tutorial run checkpoint"):
        load_run(tmp_path / "old.pt")


def one_line(excinfo):
    assert "\n" not in str(excinfo.value)


def test_refusals_are_one_line(toy, tmp_path):
    register_kind("othertest", 1, lambda cfg, ck: nn.Linear(1, 1), describe="an other")
    try:
        save_run(tmp_path / "o.pt", "othertest", nn.Linear(1, 1), {})
        with pytest.raises(
            InputError, match="o.pt is a othertest run, not a toytest run"
        ) as e:
            load_run(tmp_path / "o.pt", "toytest")
        one_line(e)
    finally:
        del KINDS["othertest"]
    with pytest.raises(InputError, match="a kind unknown here") as e:
        load_run(tmp_path / "o.pt")  # its kind is no longer registered
    one_line(e)
    net = nn.Linear(2, 2)
    save_run(tmp_path / "a.pt", "toytest", net, {"n_in": 2, "n_out": 2})
    ck = torch.load(tmp_path / "a.pt", weights_only=True)
    save_checkpoint({**ck, "format": "sat_tutorial.toytest/3"}, tmp_path / "new.pt")
    with pytest.raises(InputError, match="version 3 of a toytest run.*up to 2") as e:
        load_run(tmp_path / "new.pt")
    one_line(e)
    save_checkpoint({**ck, "config": {"n_in": 5, "n_out": 2}}, tmp_path / "unfit.pt")
    with pytest.raises(
        InputError,
        match="unfit.pt: not a complete toytest run, or weights that do not fit",
    ) as e:
        load_run(tmp_path / "unfit.pt")
    one_line(e)
    (tmp_path / "junk.pt").write_bytes(b"\x00" * 10)
    with pytest.raises(
        InputError,
        match="junk.pt could not be loaded: it is not a sat_tutorial toytest",
    ) as e:
        load_run(tmp_path / "junk.pt", "toytest")
    one_line(e)
    with pytest.raises(InputError, match="is a folder"):
        load_run(tmp_path)
    with pytest.raises(InputError, match="has no live weights"):
        load_run(tmp_path / "a.pt", live=True)


def test_non_finite_weights_are_refused(toy, tmp_path):
    """A diverged update's weights are never written over the good file (the file
    there stays loadable), and a file poisoned elsewhere is refused at load."""
    net = nn.Linear(2, 2)
    good = save_run(tmp_path / "bad.pt", "toytest", net, {"n_in": 2, "n_out": 2})
    before = good.read_bytes()
    for bad in (float("nan"), float("inf")):
        w = {k: v.detach().clone() for k, v in net.state_dict().items()}
        w["bias"][1] = bad
        with pytest.raises(StopRun, match="bad.pt not written: model.bias holds NaN"):
            save_run(good, "toytest", w, {"n_in": 2, "n_out": 2})
        assert good.read_bytes() == before
        load_run(good)  # the known-good file
        ck = load_checkpoint(good)
        ck["model"] = w
        save_checkpoint(ck, tmp_path / "poisoned.pt")
        with pytest.raises(
            InputError, match="poisoned.pt: model weight bias holds NaN or inf"
        ):
            load_run(tmp_path / "poisoned.pt")


#: a full disk as the OS says it, and as torch's zip writer says it: its
#: "failed writing file", and "unexpected pos", which torch 2.14 raised here when a
#: checkpoint was written onto a full tmpfs
FULL_DISK = {
    "oserror": (OSError(28, "No space left on device"), "No space left"),
    "torch-writer": (
        RuntimeError(
            "[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed "
            "writing file data/0: file write failed"
        ),
        "PytorchStreamWriter failed writing file data/0",
    ),
    "torch-writer-pos": (
        RuntimeError(
            "[enforce fail at inline_container.cc:672] . unexpected pos 768 vs 662"
        ),
        "unexpected pos 768",
    ),
}


@pytest.mark.parametrize("how", list(FULL_DISK))
def test_a_failed_write_is_one_line_and_keeps_the_earlier_file(
    toy, tmp_path, monkeypatch, how
):
    net = nn.Linear(2, 2)
    save_run(tmp_path / "a.pt", "toytest", net, {"n_in": 2, "n_out": 2})
    error, said = FULL_DISK[how]

    def full(obj, f, *a, **k):
        raise error

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(StopRun, match=r"could not write .*a\.pt: ") as e:
        save_run(tmp_path / "a.pt", "toytest", nn.Linear(2, 2), {"n_in": 2, "n_out": 2})
    one_line(e)
    assert said in str(e.value) and "before is kept" in str(e.value)
    monkeypatch.undo()
    got = load_run(tmp_path / "a.pt").model
    assert torch.equal(got.weight, net.weight)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pt"]  # no temporary left


def test_other_runtime_errors_of_a_write_are_not_called_a_full_disk(
    toy, tmp_path, monkeypatch
):
    save_run(tmp_path / "a.pt", "toytest", nn.Linear(2, 2), {"n_in": 2, "n_out": 2})

    def bug(obj, f, *a, **k):
        raise RuntimeError("a bug in the saved object")

    monkeypatch.setattr(torch, "save", bug)
    with pytest.raises(RuntimeError, match="a bug in the saved object") as e:
        save_run(tmp_path / "a.pt", "toytest", nn.Linear(2, 2), {"n_in": 2, "n_out": 2})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pt"]


def test_load_run_imports_the_module_of_a_kind(monkeypatch):
    monkeypatch.setitem(
        runs.KIND_MODULES, "lazytest", "sat_tutorial.nonexistent_module"
    )
    with pytest.raises(ImportError):
        kind_of("lazytest")


def test_run_flags_share_help_and_checks(tmp_path):
    parsers = []
    for kw in ({}, {"out": "runs/x", "last": "checkpoint.pt", "time_budget": None}):
        p = argparse.ArgumentParser()
        add_run_flags(p, **kw)
        parsers.append(p)
    helps = [
        {a.dest: a.help for a in p._actions if a.dest != "resume"} for p in parsers
    ]
    assert helps[0] == helps[1]
    assert "minutes" in helps[0]["time_budget"]
    args = parsers[0].parse_args(["--out", str(tmp_path / "r"), "--time-budget", "2"])
    assert args.time_budget == 2.0 and check_run_flags(args) == []
    with pytest.raises(SystemExit):
        parsers[0].parse_args(["--out", "x", "--time-budget", "nan"])
    (tmp_path / "f").write_text("")
    args.out = str(tmp_path / "f")
    with pytest.raises(InputError, match="is a file, not a folder"):
        check_run_flags(args)
    args.out, args.device = str(tmp_path / "r"), "tpu9"
    with pytest.raises(InputError, match="is not a device"):
        check_run_flags(args)


def _holding(out) -> subprocess.Popen:
    "Another process that claims the run folder `out` (as a training command does) and waits."
    code = (
        "import sys, time; from sat_tutorial.run_folder import check_out; "
        "check_out(sys.argv[1], False, False); print('locked', flush=True); "
        "time.sleep(120)"
    )
    p = subprocess.Popen(
        [sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True
    )
    assert p.stdout.readline().strip() == "locked"
    return p


def test_a_live_run_locks_its_folder_and_a_killed_ones_lock_is_taken_over(
    tmp_path, capsys
):
    """A second process that would write to a folder a live run holds is refused in one
    line naming that run's pid, from Python and from the command line (nothing written);
    once that run is killed (kill -9: it removes nothing), its lock is stale and the
    next run takes it over; a command releases its lock when it ends."""
    from sat_tutorial.cli import main
    from sat_tutorial.run_folder import check_out
    from sat_tutorial.run_folder import LOCK_NAME, release_run

    out = tmp_path / "run"
    other = _holding(out)
    try:
        with pytest.raises(InputError, match=f"in use by process {other.pid} on "):
            check_out(out, False, False)
        for argv in (
            ["train", "--out", str(out)],
            ["draw", "train", "--out", str(out)],
        ):
            assert main([*argv, "--device", "cpu"]) == 1
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and f"in use by process {other.pid}" in err[0]
        assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]
    finally:
        other.kill()  # SIGKILL: the lock file stays behind, stale
        other.wait()
    assert (out / LOCK_NAME).read_text().split()[0] == str(other.pid)
    assert check_out(out, False, False) == []  # taken over
    assert (out / LOCK_NAME).read_text().split()[0] == str(os.getpid())
    release_run(out)
    assert not (out / LOCK_NAME).exists()
    fresh = tmp_path / "fresh"  # a command that fails after claiming a new folder
    assert main(["train", "--out", str(fresh), "--device", "tpu9"]) == 1
    assert not fresh.exists()  # released, and the folder made for it removed
