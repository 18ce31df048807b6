"""The Learner's mixed precision (issue 60): autocast scoped to the objective, so that
nothing is left switched on after an error, and the loss scaling's `backward` and
`opt_step` only for the run; bf16 runs through the `AMP` callback, the toy Learner's
and a captioner's."""

import pytest
import torch
import torch.nn as nn

from sat_tutorial.learner import AMP, Callback, Clock, Learner, Limits, StopRun

AMPS = {  # dtype, and a loss scaler for float16 (a scale at which no step overflows)
    "bf16": lambda: (torch.bfloat16, None),
    "fp16-scaled": lambda: (torch.float16, torch.amp.GradScaler("cpu", init_scale=256)),
}


@pytest.fixture(autouse=True)
def _autocast_off_afterwards():
    "Whatever a test leaves behind, the next one starts without autocast."
    yield
    if torch.is_autocast_enabled("cpu"):
        torch.set_autocast_enabled("cpu", False)
        torch.clear_autocast_cache()


def float32_after() -> bool:
    "Autocast is off: a matrix product of float32 tensors is float32 again."
    ones = torch.ones(4, 4)
    return not torch.is_autocast_enabled("cpu") and (ones @ ones).dtype == torch.float32


def own_methods(learn: Learner) -> bool:
    "The Learner's own `backward` and `opt_step`, not a callback's replacements."
    return (
        "backward" not in vars(learn)
        and "opt_step" not in vars(learn)
        and learn.backward.__func__ is Learner.backward
        and learn.opt_step.__func__ is Learner.opt_step
    )


class Seen(Callback):
    """What each step saw: whether `backward` was replaced while the run went on, and
    the loss."""

    def __init__(self):
        self.replaced, self.losses = [], []

    def after_step(self, learn):
        self.replaced.append("backward" in vars(learn))
        self.losses.append(learn.stats["loss"])


def toy_learner(amp, total=8, fail=None, at=3):
    """A linear regression on 32 rows in batches of 8, trained with `amp`; with `fail`,
    step `at`'s objective gives a NaN loss ("nan") or raises ("raise")."""
    torch.manual_seed(0)
    net = nn.Linear(4, 1)
    X, y = torch.randn(32, 4), torch.randn(32, 1)
    dtypes, seen = [], Seen()

    def batches(learn):
        for i in range(learn.pos, 4):
            yield X[8 * i : 8 * i + 8], y[8 * i : 8 * i + 8]

    def objective(learn, batch):
        out = net(batch[0])
        dtypes.append(out.dtype)
        if fail == "raise" and learn.step + 1 == at:
            raise RuntimeError("the objective failed")
        loss = ((out.float() - batch[1]) ** 2).mean()
        if fail == "nan" and learn.step + 1 == at:
            loss = loss * float("nan")
        return loss, {}

    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    cbs = [Limits(Clock()), seen] + ([AMP(*amp, "cpu")] if amp else [])
    return Learner(opt, objective, batches, total, cbs), net, dtypes, seen


@pytest.mark.parametrize("fail", ["nan", "raise"])
@pytest.mark.parametrize("amp", list(AMPS))
def test_an_error_in_the_objective_leaves_no_autocast_and_the_learners_methods(
    amp, fail
):
    """A NaN stop (FiniteLoss) or an exception in the objective at step 3: autocast is
    off afterwards (a float32 product is float32) and `backward`/`opt_step` are the
    Learner's own again; during the run the objective ran under autocast."""
    dtype, scaler = AMPS[amp]()
    learn, _, dtypes, seen = toy_learner((dtype, scaler), fail=fail, at=3)
    error = StopRun if fail == "nan" else RuntimeError
    match = "step 3: the loss is nan" if fail == "nan" else "the objective failed"
    with pytest.raises(error, match=match):
        learn.fit()
    assert dtypes == [dtype] * 3  # steps 1-3 under autocast
    assert seen.replaced == [scaler is not None] * 2  # scaled while the run went on
    assert float32_after()
    assert own_methods(learn)
    assert learn.step == 2


@pytest.mark.parametrize("amp", list(AMPS))
def test_a_mixed_precision_fit_through_the_amp_callback(amp):
    """A whole run through `AMP`: every step's objective under autocast, the loss going
    down, float32 weights that differ from the float32 run's; afterwards autocast is off
    and the Learner has its own methods."""
    dtype, scaler = AMPS[amp]()
    learn, net, dtypes, seen = toy_learner((dtype, scaler), total=8)
    learn.fit()
    assert dtypes == [dtype] * 8 and learn.step == 8
    assert seen.losses[-1] < seen.losses[0]
    assert float32_after() and own_methods(learn)
    plain, net32, dtypes32, _ = toy_learner(None, total=8)
    plain.fit()
    assert dtypes32 == [torch.float32] * 8
    assert net.weight.dtype == torch.float32 and net.weight.isfinite().all()
    assert not torch.equal(net.weight, net32.weight)  # autocast changed the numbers
    assert torch.allclose(net.weight, net32.weight, atol=0.05)  # but not the descent
    if scaler is not None:  # no step skipped, and the scale is resumable state
        assert scaler.get_scale() == 256 and "scaler" in learn.state_dict()


def test_a_captioner_trains_in_bf16_through_the_amp_callback(tmp_path, monkeypatch):
    """`fit` with --amp --amp-dtype bf16 on a CPU: each step's loss computed under bf16
    autocast, finite float32 weights that differ from the float32 run's, and autocast
    off when `fit` returns."""
    import sat_tutorial.fit as fit_module
    import sat_tutorial.step_settings as step_settings
    from sat_tutorial.checkpoints import load_checkpoint
    from fakes import QUIET
    from fakes import tiny_config as tiny

    monkeypatch.setattr(step_settings, "cpu_has_fast_bf16", lambda: True)
    real, seen = fit_module.caption_loss, []

    def recorded(run, batch):
        seen.append(
            torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu")
        )
        return real(run, batch)

    monkeypatch.setattr(fit_module, "caption_loss", recorded)
    fit_module.fit(
        tiny(steps=4, amp=True, amp_dtype="bf16"), tmp_path / "bf16", **QUIET
    )
    assert seen == [torch.bfloat16] * 4 and float32_after()
    fit_module.fit(tiny(steps=4), tmp_path / "fp32", **QUIET)
    assert seen[4:] == [False] * 4
    bf16, fp32 = (load_checkpoint(tmp_path / d / "last.pt") for d in ("bf16", "fp32"))
    assert bf16["step"] == fp32["step"] == 4
    weights = bf16["model"]
    assert all(v.dtype != torch.bfloat16 for v in weights.values())
    assert all(v.isfinite().all() for v in weights.values() if v.is_floating_point())
    assert any(not torch.equal(weights[k], fp32["model"][k]) for k in weights)
