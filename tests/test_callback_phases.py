"""The order in which every family's Learner calls its callbacks, as each training
command builds it: named phases (`learner.PHASES`, each with its written contract)
instead of bare order numbers (issue 60). At every event the callbacks act in the order
the numbers gave; only `Progress` (before each batch, where no other callback of the
guards acts) moved in the list, from before the clock into the "rate" phase."""

import pytest

from sat_tutorial import learner
from sat_tutorial.cli import main
from test_lifecycle_matrix import FAMILIES

COMMANDS = {fam: argv for fam, (argv, _) in FAMILIES.items()}  # each command, tiny
COMMANDS["captioner --ema --amp --clip"] = [
    *COMMANDS["captioner"],
    *("--ema", "0.9", "--amp", "--amp-dtype", "bf16", "--clip", "1"),
]
GUARDS = ["Clock", "Diverged", "FiniteLoss"]
END = ["CtrlC", "Checkpoint", "ProgressBar"]
ORDER = {
    "captioner": [
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
    "captioner --ema --amp --clip": [
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
    "ram": [*GUARDS, "Anneal", "Means", "Limits", "ValidateRAM", *END],
    "draw": [*GUARDS, "Clip", "Limits", "Losses", *END],
    "ocr": [*GUARDS, "Cosine", "Clip", "Limits", "LossLog", *END],
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


def test_a_callback_names_a_phase_the_learner_knows():
    class Mine(learner.Callback):
        phase = "somewhere"

    with pytest.raises(ValueError, match="phase 'somewhere' is not one of"):
        learner.Learner(None, None, None, 1, [Mine()])
