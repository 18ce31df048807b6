"""The Captioner protocol, checked the same way for every registered captioner: shapes,
clear errors, `step` replaying `forward`, padding that never matters, the hooks."""

import copy
import re

import pytest
import torch

from fakes import caption_batch
from sat_tutorial.data import Vocab
from sat_tutorial.hard_attention import HardAttentionCaptioner
from sat_tutorial.captioner import Captioner
from sat_tutorial.training import CAPTIONERS as REGISTERED
from sat_tutorial.transformer import TransformerCaptioner

CAPTIONERS = list(REGISTERED.values())  # every class `@register`ed (notebook 06)
NAMES = list(REGISTERED)
EXTRA = {
    TransformerCaptioner: dict(heads=1)
}  # d_model 6 is no multiple of the default 8 heads
# the captioners with notebook 06b's option to form the shared operands' gradients once
GRADS_ONCE = [
    c for c in CAPTIONERS if isinstance(getattr(c, "step_grads_once", None), bool)
]


def test_every_captioner_and_its_paper_form_is_registered():
    "`--model` offers what `@register` holds: the CLI's models and the papers' forms."
    for name in ("soft", "hard", "adaptive", "butd", "transformer"):
        assert (
            name in REGISTERED
            and name + "-paper" in REGISTERED
            or name in ("transformer",)
        ), name
    assert "butd-paper" in REGISTERED and "hard-paper" in REGISTERED
    assert all(issubclass(c, Captioner) for c in CAPTIONERS)
    assert len(set(CAPTIONERS)) == len(CAPTIONERS)  # one name per class
    # the fast paths are options of the CLI's models, never of the papers' classes
    assert {REGISTERED[n] for n in ("soft", "hard", "adaptive", "butd")} <= set(
        GRADS_ONCE
    )
    assert not {REGISTERED[n] for n in NAMES if n.endswith("-paper")} & set(GRADS_ONCE)


def test_register_refuses_a_second_class_under_a_taken_name():
    from sat_tutorial.registry import register

    with pytest.raises(
        ValueError, match="'soft' is already FastSoftAttentionCaptioner"
    ):

        @register("soft")
        class Other(REGISTERED["soft-paper"]):
            pass

    with pytest.raises(TypeError, match="is not a Captioner"):
        register("x")(torch.nn.Linear)


@pytest.fixture
def mine():
    "A captioner `@register`ed after every module was imported; unregistered after."
    from sat_tutorial.registry import PRESETS, register

    @register("mine", preset=dict(dropout=0.0))
    class Mine(REGISTERED["soft-paper"]):
        "Soft attention under a name of the user's own."

    yield Mine
    del REGISTERED["mine"], PRESETS["mine"]


def test_a_captioner_registered_after_import_trains(mine, tmp_path, capsys):
    """The registry decides when a configuration is checked: `TrainConfig` accepts a
    model registered after import, `fit` trains it on the scenes, its run file loads
    back as that class, and `sat-tutorial train --model` offers it."""
    from sat_tutorial.cli import build_parser
    from sat_tutorial.core import InputError
    from sat_tutorial.checkpoints import load_checkpoint
    from sat_tutorial.fit import fit
    from sat_tutorial.training import TrainConfig, load_checkpoint_model, scenes_config

    assert TrainConfig(model="mine").model == "mine"
    with pytest.raises(
        InputError, match="model must be one of .*soft, .*mine, not 'nope'"
    ):
        TrainConfig(model="nope")
    sizes = dict(embed_dim=8, hidden_dim=8, attention_dim=8, feature_dim=8)
    cfg = scenes_config(
        model="mine", steps=2, n_train=40, n_val=0, n_test=0, batch_size=8, **sizes
    )
    assert cfg.dropout == 0.0  # its preset
    summary = fit(cfg, tmp_path, progress=False, log=lambda *a: None)
    assert summary["steps"] == 2 and load_checkpoint(tmp_path / "last.pt")["step"] == 2
    assert isinstance(load_checkpoint_model(tmp_path / "last.pt").model.captioner, mine)
    args = build_parser().parse_args(["train", "--model", "mine", "--out", "x"])
    assert args.model == "mine"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    assert re.search(r"--model \{[^}]*\bsoft,[^}]*,mine\}", capsys.readouterr().out)


def small(cls, **kw):
    torch.manual_seed(1)
    return cls(
        15,
        8,
        **{
            **dict(embed_dim=6, hidden_dim=7, attention_dim=5, dropout=0.0),
            **EXTRA.get(cls, {}),
            **kw,
        },
    )


@pytest.mark.parametrize("cls", CAPTIONERS)
def test_protocol_shapes(cls):
    m = small(cls, dropout=0.5)
    caps, lengths = caption_batch()
    feats = torch.randn(3, 10, 8)
    logits, attn = m(feats, caps, lengths)
    assert logits.shape == (3, 5, 15) and attn.shape == (3, 5, 10)
    state = m.init_state(feats)
    assert isinstance(state, tuple) and all(
        isinstance(s, torch.Tensor) and s.shape[0] == 3 for s in state
    )
    lp, state2, a = m.step(caps[:, 0], state)
    assert lp.shape == (3, 15) and a.shape == (3, 10) and len(state2) == len(state)
    assert torch.allclose(lp.exp().sum(-1), torch.ones(3), atol=1e-5)
    loss, stats = m.loss(feats, caps, lengths)
    assert loss.ndim == 0 and "nll" in stats
    assert all(0 <= i < len(state) for i in cls.static_state)


@pytest.mark.parametrize("cls", CAPTIONERS)
def test_protocol_hooks(cls):
    "The hooks: `set_progress` and `set_reads` validate, `unused_parameters` says."
    m = small(cls)
    assert m.run_progress == 0.0  # the share of the run done: 0 until `set_progress`
    m.set_progress(0.25)
    assert m.run_progress == 0.25
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match=f"{cls.__name__}: progress must be in"):
            m.set_progress(bad)
    assert m.run_progress == 0.25
    with pytest.raises(ValueError, match=f"{cls.__name__} cannot read 'bogus'"):
        m.set_reads("bogus")
    for reads in cls.INFERENCE:
        m.set_reads(reads)
        assert m.inference == reads
    assert isinstance(m.unused_parameters(), bool)
    assert m.unused_parameters() == issubclass(cls, HardAttentionCaptioner)


def test_the_protocol_is_abstract():
    "A class that leaves out one of the four methods cannot be built."

    class NoLoss(Captioner):
        def forward(self, feats, captions, lengths):
            return None

        def init_state(self, feats):
            return ()

        def step(self, words, state):
            return None

    with pytest.raises(TypeError, match="abstract"):
        NoLoss()


@pytest.mark.parametrize("cls", CAPTIONERS)
def test_wrong_feature_dim_is_a_clear_error(cls):
    caps, lengths = caption_batch()
    with pytest.raises(ValueError, match="feats: dim 2 should be 8"):
        small(cls)(torch.randn(3, 10, 9), caps, lengths)


@pytest.mark.parametrize("cls", CAPTIONERS)
def test_step_replays_forward_in_eval_mode(cls):
    m = small(cls, dropout=0.3).eval()
    caps, lengths = caption_batch()
    feats = torch.randn(3, 10, 8)
    with torch.no_grad():
        logits, attn = m(feats, caps, lengths)
        st = m.init_state(feats)
        for t in range(caps.shape[1] - 1):
            lp, st, a = m.step(caps[:, t], st)
            assert torch.allclose(lp, logits[:, t].log_softmax(-1), atol=1e-5)
            assert torch.allclose(a, attn[:, t], atol=1e-6)


@pytest.mark.parametrize("cls", CAPTIONERS)
@pytest.mark.parametrize("alpha_c", [0.0, 0.5])
def test_padding_changes_nothing_with_dropout_seeded(cls, alpha_c):
    """Other words in the padded positions change neither the loss nor any gradient
    (same seed: same dropout, same samples)."""
    if cls is HardAttentionCaptioner and alpha_c:
        pytest.skip(
            "the paper's hard attention (notebook 07) has no doubly stochastic penalty"
        )
    m = small(
        cls,
        dropout=0.3,
        **({} if cls is HardAttentionCaptioner else {"alpha_c": alpha_c}),
    )
    caps, lengths = caption_batch()
    feats = torch.randn(3, 10, 8)
    other = caps.clone()
    other[caps == Vocab.pad] = 9
    out = []
    for c in (caps, other):
        if isinstance(m, HardAttentionCaptioner):
            m.baseline.fill_(-10.0)
            m.baseline_steps.fill_(1)  # the same b
        torch.manual_seed(1)
        m.zero_grad()
        loss, stats = m.loss(feats, c, lengths)
        loss.backward()
        assert (
            "penalty" in stats or not alpha_c or isinstance(m, HardAttentionCaptioner)
        )
        out.append(
            (
                loss.detach(),
                torch.cat(
                    [p.grad.flatten() for p in m.parameters() if p.grad is not None]
                ),
            )
        )
    assert torch.equal(out[0][0], out[1][0]) and torch.equal(out[0][1], out[1][1])


def _graph_nodes(t):
    "The class names of the autograd nodes behind `t`."
    seen, todo = set(), [t.grad_fn]
    while todo:
        f = todo.pop()
        if f is not None and f not in seen:
            seen.add(f)
            todo += [g for g, _ in f.next_functions]
    return [type(f).__name__ for f in seen]


@pytest.mark.parametrize("cls", GRADS_ONCE)
def test_gradients_formed_once_equal_per_step(cls):
    """`step_grads_once` (StepOperand, notebook 06b) changes how the gradients of what
    every step multiplies are formed (the graph holds `_SumSteps` nodes only with it),
    not their values."""
    m = small(cls).double().train()
    caps, lengths = caption_batch()
    feats = torch.randn(3, 10, 8, dtype=torch.float64)
    names, params = zip(*m.named_parameters())
    grads, start = (
        {},
        copy.deepcopy(m.state_dict()),
    )  # hard attention's loss moves its baseline: start both alike
    for once in (False, True):
        m.load_state_dict(start)
        m.step_grads_once = once
        f = feats.clone().requires_grad_()
        torch.manual_seed(0)  # hard attention: the same sampled locations
        loss = m.loss(f, caps, lengths)[0]
        n_sum = _graph_nodes(loss).count("_SumStepsBackward")
        assert (n_sum > 0) == once, (once, n_sum)
        grads[once] = torch.autograd.grad(loss, params + (f,), allow_unused=True)
    for n, a, b in zip(names + ("feats",), grads[False], grads[True]):
        assert (a is None) == (b is None), n
        if a is not None:
            assert torch.allclose(a, b, rtol=1e-10, atol=1e-12), n


@pytest.mark.parametrize("name", [n for n in NAMES if n + "-paper" in NAMES])
def test_the_cli_model_computes_the_papers_function(name):
    """`--model soft` (and hard, adaptive, butd) is its paper's class with faster
    kernels: the same seed gives the same weights and the same loss and gradients."""
    fast, paper = REGISTERED[name], REGISTERED[name + "-paper"]
    assert issubclass(fast, paper)
    caps, lengths = caption_batch()
    feats = torch.randn(3, 10, 8, dtype=torch.float64)
    out = []
    for cls in (paper, fast):
        m = small(cls).double()
        torch.manual_seed(0)  # hard attention: the same sampled locations
        loss = m.loss(feats, caps, lengths)[0]
        grads = torch.autograd.grad(loss, list(m.parameters()), allow_unused=True)
        out.append((m.state_dict(), loss, grads))
    (sd_p, l_p, g_p), (sd_f, l_f, g_f) = out
    assert list(sd_p) == [k for k in sd_f if k != "train_steps"]
    assert all(torch.equal(sd_p[k], sd_f[k]) for k in sd_p)
    assert torch.allclose(l_p, l_f, rtol=1e-12)
    for a, b in zip(g_p, g_f):
        assert (a is None) == (b is None)
        assert a is None or torch.allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("cls", CAPTIONERS)
def test_bf16_autocast_training_step(cls):
    """`--amp` on a CPU: a Learner step under bf16 autocast (the `AMP` callback), with
    an encoder trained through the annotations, gives finite float32 gradients."""
    from sat_tutorial.captioner import encode
    from sat_tutorial.learner import AMP, Clip, Clock, Learner, Limits

    m, enc = small(cls), torch.nn.Linear(8, 8)
    caps, lengths = caption_batch()
    batch = {"images": torch.randn(3, 10, 8), "captions": caps, "lengths": lengths}
    opt = torch.optim.Adam(list(enc.parameters()) + list(m.parameters()), lr=1e-3)
    before = [p.detach().clone() for p in m.parameters()]
    seen = []

    def objective(learn, batch):
        seen.append(
            torch.get_autocast_dtype("cpu")
            if torch.is_autocast_enabled("cpu")
            else None
        )
        return m.loss(encode(enc, batch["images"]), batch["captions"], batch["lengths"])

    cbs = [Limits(Clock()), AMP(torch.bfloat16, None, "cpu"), Clip(5.0)]
    learn = Learner(opt, objective, lambda learn: iter([batch]), 1, cbs)
    learn.fit()
    assert learn.step == 1 and seen == [torch.bfloat16]
    assert not torch.is_autocast_enabled("cpu")
    stats = learn.stats
    assert torch.isfinite(torch.tensor(stats["loss"])) and torch.isfinite(
        torch.tensor(stats["grad_norm"])
    )
    for p in list(m.parameters()) + list(enc.parameters()):
        assert p.grad is None or (
            p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all()
        )
    assert any(not torch.equal(a, p) for a, p in zip(before, m.parameters()))
    assert enc.weight.grad is not None and enc.weight.grad.abs().sum() > 0


def test_quick_train_takes_clipped_adam_steps_and_goes_round_the_loader_again():
    """Notebook 06's bare loop on a model whose loss is (θ − 3)²: the statistics hold the
    loss and the gradient's norm before clipping; Adam's first step moves θ by lr; a
    loader of one batch is gone through again; a `None` batch (no readable image) is
    skipped but counts as a step; `clip=0` leaves the gradient as it is."""
    from sat_tutorial.captioner import quick_train

    class Quadratic(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.theta = torch.nn.Parameter(torch.zeros(()))

        def loss(self, feats, captions, lengths):
            return (self.theta - 3) ** 2, {"theta": float(self.theta.detach())}

    batch = {"images": torch.zeros(1, 1, 1), "captions": None, "lengths": None}
    q = Quadratic()
    hist = quick_train(torch.nn.Identity(), q, [batch], 3, lr=0.1, progress=False)
    assert [h["theta"] for h in hist][0] == 0.0 and len(hist) == 3
    assert hist[0]["loss"] == 9.0 and hist[0]["grad_norm"] == 6.0  # |∂/∂θ| = 6
    assert abs(hist[1]["theta"] - 0.1) < 1e-6  # Adam's first step: lr·sign(g)
    assert hist[2]["theta"] > hist[1]["theta"]
    assert (
        len(quick_train(torch.nn.Identity(), q, [None, batch], 4, progress=False)) == 2
    )
    q0 = Quadratic()  # clip=0: not clipped (the norm still reported), so θ moves
    h0 = quick_train(
        torch.nn.Identity(), q0, [batch], 2, lr=0.1, clip=0, progress=False
    )
    assert h0[0]["grad_norm"] == 6.0 and abs(h0[1]["theta"] - 0.1) < 1e-6
