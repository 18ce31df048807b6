"""The order in which every family's Learner calls its callbacks, as each training
command builds it: named phases (`learner.PHASES`, each with its written contract)
instead of bare order numbers (issue 60). At every event the callbacks act in the order
the numbers gave; only `Progress` (before each batch, where no other callback of the
guards acts) moved in the list, from before the clock into the "rate" phase."""

import pytest

from sat_tutorial import learner
from sat_tutorial.cli import main
from test_hostile import tiny_flags

COMMANDS = {
    "train": ["train", *tiny_flags(steps=2)],
    "train --ema --amp --clip": [
        "train",
        *tiny_flags(steps=2),
        "--ema",
        "0.9",
        "--amp",
        "--amp-dtype",
        "bf16",
        "--clip",
        "1",
    ],
    "ram train": ["ram", "train", "--steps", "2", "--limit", "100", "--quiet"],
    "draw train": ["draw", "train", "--steps", "2", "-T", "2", "--hidden", "8"],
    "ocr train": [
        "ocr",
        "train",
        "--steps",
        "2",
        "--n-train",
        "48",
        "--n-test",
        "8",
        "--channels",
        "8",
        "--quiet",
    ],
}
GUARDS = ["Clock", "Diverged", "FiniteLoss"]
END = ["CtrlC", "Checkpoint", "ProgressBar"]
ORDER = {
    "train": [
        "Unreadable",
        *GUARDS,
        "Progress",
        "Schedule",
        "AMP",
        "Clip",
        "History",
        "Limits",
        "Validate",
        *END,
    ],
    "train --ema --amp --clip": [
        "Unreadable",
        *GUARDS,
        "Progress",
        "Schedule",
        "EMA",
        "AMP",
        "Clip",
        "History",
        "Limits",
        "Validate",
        *END,
    ],
    "ram train": [*GUARDS, "Anneal", "Means", "Limits", "Validate", *END],
    "draw train": [*GUARDS, "Clip", "Limits", "Losses", *END],
    "ocr train": [*GUARDS, "Cosine", "Clip", "Limits", "LossLog", *END],
}


class Built(Exception):
    "The Learner a command built, caught before its first step."


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_commands_callbacks_act_in_their_phases_order(name, tmp_path, monkeypatch):
    def fit(self):
        raise Built(self)

    monkeypatch.setattr(learner.Learner, "fit", fit)
    with pytest.raises(Built) as e:
        main([*COMMANDS[name], "--out", str(tmp_path / "run")])
    learn = e.value.args[0]
    assert [type(cb).__name__ for cb in learn.cbs] == ORDER[name]
    phases = [learner.PHASES.index(cb.phase) for cb in learn.cbs]
    assert phases == sorted(phases)  # what the Learner sorts by


def test_a_callback_names_a_phase_the_learner_knows():
    class Mine(learner.Callback):
        phase = "somewhere"

    with pytest.raises(ValueError, match="phase 'somewhere' is not one of"):
        learner.Learner(None, None, None, 1, [Mine()])
