"""The training loop talks to a captioner only through the protocol's named hooks
(notebook 05c): `set_progress`, `unused_parameters` and `recording_reads`. A subclass
that overrides them is called through them, whatever name it is registered under."""

import contextlib

import pytest
import torch

from sat_tutorial.captioner import Captioner

from sat_tutorial.registry import CAPTIONERS
from sat_tutorial.fit import captioner_learner, distribute, prepare
from sat_tutorial.training import scenes_config

SOFT = CAPTIONERS["soft"]


def tiny(**kw):
    "A 4-step scenes run of a tiny captioner (no validation, no checkpoints between)."
    return scenes_config(
        **{
            **dict(
                steps=4,
                n_train=40,
                n_val=0,
                n_test=0,
                batch_size=8,
                val_every=0,
                ckpt_every=0,
                seed=3,
                embed_dim=8,
                hidden_dim=8,
                attention_dim=8,
                feature_dim=8,
                warmup=1,
            ),
            **kw,
        }
    )


class Probe(SOFT):
    "The soft captioner, with hooks that record each call."

    calls: list  # (hook, argument) in the order the loop called them

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls = []

    def set_progress(self, p: float) -> None:
        self.calls.append(("set_progress", p))
        super().set_progress(p)

    def unused_parameters(self) -> bool:
        self.calls.append(("unused_parameters", None))
        return True

    @contextlib.contextmanager
    def recording_reads(self):
        self.calls.append(("recording_reads", None))
        with super().recording_reads() as record:
            yield record


def test_the_hooks_are_the_protocols():
    "`Probe` overrides the base class's hooks (else the tests below test nothing)."
    for hook in ("set_progress", "unused_parameters", "recording_reads"):
        assert hasattr(Captioner, hook)
        assert getattr(Probe, hook) is not getattr(Captioner, hook), hook


def test_fit_gives_the_share_of_the_run_through_set_progress(tmp_path, monkeypatch):
    """Before each of 4 steps the loop calls `set_progress(step / 4)`, and nothing else
    of the model's beyond its loss."""
    monkeypatch.setitem(CAPTIONERS, "soft", Probe)
    run = prepare(tiny(), tmp_path, None, False, 0, 1, torch.device("cpu"), print)
    assert type(run.model) is Probe
    learn = captioner_learner(run, progress=False)
    distribute(run)
    learn.fit()
    assert run.model.calls == [("set_progress", s / 4) for s in range(4)]
    assert run.model.run_progress == 0.75  # the base hook still did its part


class FakeDDP(torch.nn.Module):
    "DistributedDataParallel's signature, without a process group: what it was given."

    def __init__(self, module, device_ids=None, find_unused_parameters=False):
        super().__init__()
        self.module, self.find_unused_parameters = module, find_unused_parameters


@pytest.mark.parametrize(
    "name,probe,unused",
    [
        ("soft", False, False),  # every parameter is in every step's graph
        ("soft", True, True),  # the same model, whose hook says otherwise
        ("hard", False, True),  # one location read per step (notebook 07)
        ("hard-paper", False, True),  # the paper's class: the same, by its hook
    ],
    ids=["soft", "probe-as-soft", "hard", "hard-paper"],
)
def test_ddp_finds_unused_parameters_when_the_model_says_so(
    tmp_path, monkeypatch, name, probe, unused
):
    """Under several processes the loss is wrapped in DDP with
    `find_unused_parameters=model.unused_parameters()`, not a test of the model's
    name."""
    import torch.distributed
    import torch.nn.parallel

    if probe:
        monkeypatch.setitem(CAPTIONERS, name, Probe)
    monkeypatch.setattr(torch.nn.parallel, "DistributedDataParallel", FakeDDP)
    monkeypatch.setattr(torch.distributed, "get_backend", lambda: "fake")
    cfg = tiny(model=name)
    run = prepare(cfg, tmp_path, None, False, 0, 1, torch.device("cpu"), print)
    run.world = 2  # as under torchrun: `distribute` wraps the loss in DDP
    distribute(run)
    ddp = run.objective.ddp_loss
    assert isinstance(ddp, FakeDDP) and ddp.module.model is run.model
    assert ddp.find_unused_parameters is unused
    if probe:
        assert run.model.calls == [("unused_parameters", None)]


def test_self_critical_training_samples_inside_recording_reads(tmp_path, monkeypatch):
    """SCST asks the model for `recording_reads()` at each step; the base class's
    records nothing, so the loss is the plain REINFORCE of the captions."""
    monkeypatch.setitem(CAPTIONERS, "soft", Probe)
    cfg = tiny(steps=2, scst=True, scst_samples=2, scst_baseline="mean")
    run = prepare(cfg, tmp_path, None, False, 0, 1, torch.device("cpu"), print)
    learn = captioner_learner(run, progress=False)
    distribute(run)
    learn.fit()
    hooks = [h for h, _ in run.model.calls]
    assert hooks == ["set_progress", "recording_reads"] * 2
