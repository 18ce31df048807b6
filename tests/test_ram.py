"""Tests of sat_tutorial.ram and sat_tutorial.ram_training: retina vs a slow reference,
shapes, gradient routing, the REINFORCE estimator, checkpoints/resume and the `ram`
command line (the data: tests/test_mnist.py)."""

import argparse, gzip, hashlib, json, math, os

import numpy as np
import pytest
import torch

from sat_tutorial.core import InputError, data_root
from sat_tutorial.ram import (
    TASKS,
    GlimpseMNIST,
    RAM,
    gaussian_log_prob,
    glimpse_corners,
    integral_image,
    ram_loss,
    reinforce_samples,
    retina,
    retina_reference,
)
from sat_tutorial.ram_cli import add_cli
from sat_tutorial.ram_training import (
    PAPER_RETINA,
    RAMConfig,
    evaluate_ram,
    load_ram,
    split_validation,
    train_ram,
)

HAVE_MNIST = all(
    (data_root() / "mnist" / "raw" / f).exists()
    for f in (
        "train-images-idx3-ubyte.gz",
        "train-labels-idx1-ubyte.gz",
        "t10k-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz",
    )
)
needs_mnist = pytest.mark.skipif(
    not HAVE_MNIST, reason="MNIST not in $SAT_TUTORIAL_DATA/mnist/raw"
)


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def fake_digits(n=50, seed=0):
    "Random 'digits': uint8 (n, 28, 28) with a few bright strokes, labels 0..9."
    rng = np.random.default_rng(seed)
    x = (rng.random((n, 28, 28)) > 0.8).astype(np.uint8) * rng.integers(
        1, 256, (n, 28, 28)
    ).astype(np.uint8)
    return x, rng.integers(0, 10, n)


# ---------------------------------------------------------------- retina


@pytest.mark.parametrize(
    "H,W,g,k",
    [
        (28, 28, 8, 1),
        (28, 28, 8, 3),
        (60, 60, 12, 3),
        (100, 100, 12, 4),
        (31, 47, 5, 2),
    ],
)
def test_retina_matches_reference(H, W, g, k):
    torch.manual_seed(H + k)
    x = torch.rand(12, 1, H, W)
    border = torch.tensor(
        [[-1.0, -1.0], [1.0, 1.0], [-1.0, 1.0], [0.97, -0.2], [-1.4, 0.0], [3.0, 3.0]]
    )  # crossing and outside the image
    l = torch.cat([torch.rand(6, 2) * 2 - 1, border])
    fast, ref = retina(x, l, g, k), retina_reference(x, l, g, k)
    assert fast.shape == (12, k, g, g)
    torch.testing.assert_close(fast, ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(
        retina(x, l, g, k, S=integral_image(x)), fast, atol=0, rtol=0
    )


def test_retina_known_values():
    x = torch.zeros(1, 1, 28, 28)
    x[0, 0, 10:18, 10:18] = 1
    assert torch.equal(
        glimpse_corners(torch.zeros(1, 2), 28, 28, 8), torch.tensor([[10, 10]])
    )
    r = retina(x, torch.zeros(1, 2), 8, 2)
    assert torch.equal(r[0, 0], torch.ones(8, 8))  # the 8×8 square, exactly
    assert torch.allclose(
        r[0, 1], torch.nn.functional.pad(torch.ones(4, 4), (2, 2, 2, 2))
    )  # 16×16 around it, 2×2 means
    ones = torch.ones(1, 1, 28, 28)
    assert (
        retina(ones, torch.tensor([[-1.0, -1.0]]), 8, 1).sum() == 16
    )  # a quarter of the patch lies inside
    assert retina(ones, torch.tensor([[1.0, 0.0]]), 8, 1).sum() == 32  # half of it
    x = torch.arange(28 * 28, dtype=torch.float32).reshape(1, 1, 28, 28) / 784
    l = torch.tensor([[0.3, -0.6]])
    c = glimpse_corners(l, 28, 28, 8)[0]
    assert torch.allclose(
        retina(x, l, 8, 1)[0, 0], x[0, 0, c[1] : c[1] + 8, c[0] : c[0] + 8], atol=1e-6
    )  # (x, y) order


# ---------------------------------------------------------------- model


def test_ram_shapes_and_locations():
    torch.manual_seed(0)
    m = RAM(g=12, k=3, glimpses=5)
    out = m(torch.rand(4, 1, 60, 60))
    assert (
        out.logits.shape == (4, 10)
        and out.log_pi.shape == (4, 4)
        and out.baseline.shape == (4, 4)
    )
    assert out.mu.shape == (4, 4, 2) and out.l.shape == (4, 5, 2)
    assert torch.equal(out.l[:, 0], torch.zeros(4, 2))
    assert not out.l.requires_grad and out.l.abs().max() <= 1
    det = m(torch.rand(4, 1, 60, 60), sample=False)
    assert torch.equal(det.l[:, 1:], det.mu.detach().clamp(-1, 1))
    assert RAM(glimpses=1)(torch.rand(2, 1, 28, 28)).log_pi.shape == (2, 0)


def test_log_prob_is_gaussian():
    u, mu = torch.randn(9, 2), torch.randn(9, 2)
    torch.testing.assert_close(
        gaussian_log_prob(u, mu, 0.2),
        torch.distributions.Normal(mu, 0.2).log_prob(u).sum(-1),
    )


def _max_grad(loss, module):
    gs = torch.autograd.grad(
        loss, list(module.parameters()), retain_graph=True, allow_unused=True
    )
    return max((g.abs().max().item() for g in gs if g is not None), default=0.0)


@pytest.mark.parametrize("detach", [True, False])
def test_gradient_routing(detach):
    torch.manual_seed(1)
    m = RAM(glimpses=4, detach_policy=detach)
    L = ram_loss(m(torch.rand(32, 1, 28, 28)), torch.randint(0, 10, (32,)))
    core = torch.nn.ModuleList([m.glimpse, m.core_h, m.core_g])
    # cross-entropy: classifier and core, never the policy (sampled l is detached) or
    # the baseline
    assert _max_grad(L["action"], m.classifier) > 0 and _max_grad(L["action"], core) > 0
    assert (
        _max_grad(L["action"], m.locator) == 0
        and _max_grad(L["action"], m.baseline) == 0
    )
    # REINFORCE: the policy; never the baseline (R - b_t is a constant) or the
    # classifier; the core only if not detached
    assert _max_grad(L["reinforce"], m.locator) > 0
    assert (
        _max_grad(L["reinforce"], m.baseline) == 0
        and _max_grad(L["reinforce"], m.classifier) == 0
    )
    assert (_max_grad(L["reinforce"], core) > 0) == (not detach)
    # baseline squared error: only the baseline (it reads a detached h_t)
    assert _max_grad(L["baseline"], m.baseline) > 0
    for part in (core, m.locator, m.classifier):
        assert _max_grad(L["baseline"], part) == 0


def test_reinforce_is_unbiased():
    a, sigma, M = -0.4, 0.25, 20000
    for mu in (-0.9, 0.2):
        exact = -2 * (mu - a)  # d/dμ E[-(u-a)^2], u ~ N(μ, σ²)
        s = reinforce_samples(mu, sigma, lambda u: -((u - a) ** 2), M, seed=3)
        assert abs(s.mean().item() - exact) < 4 * s.std().item() / math.sqrt(M)
    wrong = (
        reinforce_samples(0.2, sigma, lambda u: -((u - a) ** 2), M, seed=3) * 2
    )  # a wrongly scaled estimator is caught
    assert abs(
        wrong.mean().item() - (-2 * (0.2 - a))
    ) > 4 * wrong.std().item() / math.sqrt(M)


def test_loss_reward_override_and_values():
    torch.manual_seed(2)
    m = RAM(glimpses=3)
    x, y = torch.rand(8, 1, 28, 28), torch.randint(0, 10, (8,))
    out = m(x)
    L = ram_loss(out, y)
    R = (out.logits.argmax(-1) == y).float()
    torch.testing.assert_close(L["reward"], R.mean())
    torch.testing.assert_close(
        L["reinforce"], -(out.log_pi * (R[:, None] - out.baseline)).sum(1).mean()
    )
    torch.testing.assert_close(L["baseline"], ((R[:, None] - out.baseline) ** 2).mean())
    L2 = ram_loss(out, y, reward=torch.full((8,), 0.5))
    torch.testing.assert_close(L2["reward"], torch.tensor(0.5))


# ---------------------------------------------------------------- data:
# tests/test_mnist.py


def test_bad_task():
    with pytest.raises(ValueError, match="task must be one of"):
        RAMConfig(task="svhn")
    assert (
        RAMConfig(task="cluttered100").scales
        == PAPER_RETINA["cluttered100"]["scales"]
        == 4
    )
    assert RAMConfig(task="mnist", glimpses=3).glimpses == 3


# ---------------------------------------------------------------- training, resume,
# command line


def _tiny(task="mnist", **kw):
    X, Y = fake_digits(64, seed=1)
    cfg = RAMConfig(
        task=task,
        batch_size=16,
        hidden=32,
        glimpse_hidden=16,
        loc_hidden=16,
        glimpse_dim=32,
        **kw,
    )
    return (
        cfg,
        GlimpseMNIST(task, "train", seed=0, images=X, labels=Y),
        GlimpseMNIST(task, "test", seed=1, images=X, labels=Y),
    )


def test_resume_continues_exactly(tmp_path):
    cfg, tr, te = _tiny("cluttered60", steps=9)
    m_full, _ = train_ram(
        cfg, out=tmp_path / "a", train_data=tr, test_data=te
    )  # crosses an epoch boundary (4 steps/epoch)
    cfg5, tr, te = _tiny("cluttered60", steps=5)
    train_ram(cfg5, out=tmp_path / "b", train_data=tr, test_data=te)
    cfg9, tr, te = _tiny("cluttered60", steps=9)
    m_res, met = train_ram(
        cfg9, out=tmp_path / "b", resume=True, train_data=tr, test_data=te
    )
    assert met["step"] == 9
    for (k, a), b in zip(m_full.state_dict().items(), m_res.state_dict().values()):
        assert torch.equal(a, b), k
    bad, tr, te = _tiny("cluttered60", steps=9, lr=0.5)
    with pytest.raises(ValueError, match="different configuration"):
        train_ram(bad, out=tmp_path / "b", resume=True, train_data=tr, test_data=te)


def test_evaluate_modes():
    cfg, tr, te = _tiny(steps=1)
    model = cfg.model()
    a, b = evaluate_ram(model, te), evaluate_ram(model, te)
    assert (
        a == b and a["n"] == 64 and 0 <= a["error"] <= 1
    )  # the mean policy is deterministic
    assert evaluate_ram(model, te, mc_samples=3)["mc_samples"] == 3


def _parser():
    p = argparse.ArgumentParser(prog="sat-tutorial")
    add_cli(p.add_subparsers(dest="command"))
    return p


def test_cli_help_and_defaults(capsys):
    p = _parser()
    with pytest.raises(SystemExit):
        p.parse_args(["ram", "evaluate", "--help"])
    assert "not in the paper" in capsys.readouterr().out
    a = p.parse_args(["ram", "train", "--task", "cluttered100", "--glimpses", "4"])
    assert (
        a.task == "cluttered100"
        and a.glimpses == 4
        and a.patch is None
        and callable(a.func)
    )
    with pytest.raises(SystemExit):
        p.parse_args(["ram", "train", "--task", "cifar"])
    with pytest.raises(SystemExit):
        p.parse_args(["ram"])


@needs_mnist
def test_cli_train_then_evaluate(tmp_path, capsys):
    p = _parser()
    a = p.parse_args(
        [
            "ram",
            "train",
            "--task",
            "translated",
            "--steps",
            "6",
            "--limit",
            "300",
            "--batch-size",
            "50",
            "--glimpses",
            "3",
            "--out",
            str(tmp_path),
            "--quiet",
            "--device",
            "cpu",
            "--seed",
            "3",
        ]
    )
    assert a.func(a) == 0
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert (
        metrics["step"] == 6
        and metrics["config"]["glimpses"] == 3
        and metrics["config"]["scales"] == 3
    )
    assert 0 <= metrics["test_error"] <= 1 and len(metrics["history"]) >= 1
    assert (
        metrics["config"]["val"] == 30 and metrics["evals"][-1]["on"] == "validation"
    )  # default: a tenth of --limit
    from sat_tutorial.mnist import mnist_source

    assert metrics["data"] == mnist_source()  # real MNIST (MD5-checked) or stand-in
    for ck, key in (
        ("best.pt", "test_error"),
        ("ram.pt", "test_error_last"),
    ):  # best on validation; last
        a = p.parse_args(
            [
                "ram",
                "evaluate",
                "--checkpoint",
                str(tmp_path / ck),
                "--json",
                str(tmp_path / "e.json"),
                "--device",
                "cpu",
            ]
        )
        assert a.func(a) == 0
        ev = json.loads((tmp_path / "e.json").read_text())
        assert (
            ev["n"] == 300
            and ev["task"] == "translated"
            and ev["error"] == pytest.approx(metrics[key])
            and ev["data"] == metrics["data"]
        )
    a = p.parse_args(
        [
            "ram",
            "train",
            "--task",
            "translated",
            "--steps",
            "8",
            "--limit",
            "300",
            "--batch-size",
            "50",
            "--glimpses",
            "3",
            "--out",
            str(tmp_path),
            "--quiet",
            "--device",
            "cpu",
            "--seed",
            "3",
            "--resume",
        ]
    )
    assert (
        a.func(a) == 0
        and json.loads((tmp_path / "metrics.json").read_text())["step"] == 8
    )


# ---------------------------------------------------------------- validation split,
# best weights, first location


def test_split_validation_is_disjoint_and_ordered():
    X, Y = fake_digits(60)
    tr, va = split_validation(
        GlimpseMNIST("translated", "train", seed=0, images=X, labels=Y), 10
    )
    assert len(tr) == 50 and len(va) == 10
    assert (
        np.array_equal(tr.images, X[:50])
        and np.array_equal(va.images, X[50:])
        and np.array_equal(va.labels, Y[50:])
    )
    assert (
        va.layout["src"] < 10
    ).all()  # validation clutter comes from validation digits only
    for n in (0, 60, 61):
        with pytest.raises(ValueError, match="validation split"):
            split_validation(GlimpseMNIST("mnist", images=X, labels=Y), n)


def test_train_with_validation_keeps_best_weights(tmp_path):
    X, Y = fake_digits(96, seed=2)
    cfg = RAMConfig(
        task="mnist",
        batch_size=16,
        hidden=32,
        glimpse_hidden=16,
        loc_hidden=16,
        glimpse_dim=32,
        epochs=3,
        val=32,
        lr=3e-3,
    )
    te = GlimpseMNIST("mnist", "test", seed=1, images=X[:40], labels=Y[:40])
    model, m = train_ram(
        cfg,
        out=tmp_path,
        train_data=GlimpseMNIST("mnist", images=X, labels=Y),
        test_data=te,
    )
    assert [e["on"] for e in m["evals"]] == ["validation"] * 3 and all(
        0 <= e["train_error"] <= 1 for e in m["evals"]
    )
    best = min(
        m["evals"], key=lambda e: e["error"]
    )  # the first of equal minima is kept
    assert m["best"]["step"] == best["step"] and m["val_error"] == best["error"]
    run = load_ram(tmp_path / "best.pt")
    kept, ck = run.model, run.checkpoint
    assert ck["step"] == best["step"] and (run.kind, run.version) == ("ram", 2)
    assert (
        m["test_error"]
        == evaluate_ram(kept, te)["error"]
        == evaluate_ram(model, te)["error"]
    )  # returned model = best weights
    assert (
        json.loads((tmp_path / "metrics.json").read_text())["test_error"]
        == m["test_error"]
    )


def test_random_first_location_only_in_sampled_episodes():
    torch.manual_seed(0)
    m = RAM(init_loc="random")
    x = torch.rand(64, 1, 28, 28)
    l0 = m(x).l[:, 0]
    assert l0.abs().max() <= 1 and l0.std(0).min() > 0.4  # uniform on [-1, 1]: std 0.58
    assert torch.equal(
        m(x, sample=False).l[:, 0], torch.zeros(64, 2)
    )  # the deterministic (test) episode starts at the centre
    assert torch.equal(RAM()(x).l[:, 0], torch.zeros(64, 2))  # the paper's l_0
    with pytest.raises(ValueError, match="init_loc"):
        RAM(init_loc="corner")


# ---------------------------------------------------------------- hostile input through
# `sat-tutorial ram ...` (issue 43)


def _main(argv, capsys):
    "Run the real command line; exit status and stderr (argparse's exits included)."
    from sat_tutorial.cli import main

    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    return rc, capsys.readouterr().err


def _one_line(err: str, *names: str):
    "The last stderr line names the culprit; no traceback anywhere."
    assert "Traceback" not in err, err
    line = err.strip().splitlines()[-1]
    for n in names:
        assert n in line, (n, line)
    return line


def _mnist_dir(tmp_path, damage: str):
    """A data folder with four small MNIST files, one of them damaged in the way
    `damage` says; returns (root, damaged file)."""
    raw = tmp_path / "data" / "mnist" / "raw"
    raw.mkdir(parents=True)
    X, Y = fake_digits(40)

    def idx(a):
        return (
            bytes([0, 0, 8, a.ndim])
            + b"".join(int(n).to_bytes(4, "big") for n in a.shape)
            + a.astype(np.uint8).tobytes()
        )

    for split, (im, lb) in {
        "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
        "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
    }.items():
        (raw / im).write_bytes(gzip.compress(idx(X)))
        (raw / lb).write_bytes(gzip.compress(idx(Y)))
    bad = raw / (
        "train-labels-idx1-ubyte.gz"
        if damage == "labels-are-images"
        else "train-images-idx3-ubyte.gz"
    )
    good = bad.read_bytes()
    bad.write_bytes(
        {
            "truncated": good[: len(good) // 2],
            "not-gzip": b"<html>404 not found</html>",
            "empty": b"",
            "bad-crc": good[:-8] + bytes(4) + good[-4:],
            "labels-are-images": gzip.compress(idx(X)),
            "short-header": gzip.compress(bytes([0, 0, 8, 3, 0, 0])),
        }[damage]
    )
    return tmp_path / "data", bad


@pytest.mark.parametrize(
    "damage",
    ["truncated", "not-gzip", "empty", "bad-crc", "labels-are-images", "short-header"],
)
def test_damaged_mnist_file_is_one_line(tmp_path, monkeypatch, capsys, damage):
    root, bad = _mnist_dir(tmp_path, damage)
    monkeypatch.setenv("SAT_TUTORIAL_DATA", str(root))
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    rc, err = _main(
        [
            "ram",
            "train",
            "--steps",
            "1",
            "--limit",
            "20",
            "--out",
            str(tmp_path / "run"),
            "--quiet",
            "--device",
            "cpu",
        ],
        capsys,
    )
    assert rc == 1
    _one_line(err, str(bad))
    assert (
        not (tmp_path / "run").exists()
        and {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    )


def _fake_captioner_checkpoint(path):
    from sat_tutorial.checkpoints import save_checkpoint
    from sat_tutorial.soft_attention import SoftAttentionCaptioner

    model = SoftAttentionCaptioner(12, 8, embed_dim=8, hidden_dim=8, attention_dim=8)
    save_checkpoint(
        {
            "format": "sat_tutorial.captioner/1",
            "config": {"model": "soft", "batch_size": 4},
            "model": model.state_dict(),
            "step": 3,
        },
        path,
    )


@pytest.mark.parametrize(
    "kind", ["captioner", "draw-like", "tensor", "ram-wrong-weights", "not-torch"]
)
def test_evaluate_refuses_other_checkpoints(tmp_path, capsys, kind):
    from sat_tutorial.checkpoints import save_checkpoint

    ck = tmp_path / f"{kind}.pt"
    if kind == "captioner":
        _fake_captioner_checkpoint(ck)
    elif kind == "draw-like":
        save_checkpoint({"model": {}, "config": {"steps": 3, "T": 10}, "step": 3}, ck)
    elif kind == "tensor":
        save_checkpoint(torch.zeros(3), ck)
    elif kind == "ram-wrong-weights":
        save_checkpoint(
            {
                "format": "sat_tutorial.ram/1",
                "config": {"task": "mnist", "hidden": 64},
                "model": RAM().state_dict(),
                "step": 1,
            },
            ck,
        )
    else:
        ck.write_text("hello")
    before = ck.read_bytes()
    rc, err = _main(
        [
            "ram",
            "evaluate",
            "--checkpoint",
            str(ck),
            "--device",
            "cpu",
            "--json",
            str(tmp_path / "e.json"),
        ],
        capsys,
    )
    assert rc == 1
    line = _one_line(err, str(ck))
    if kind == "captioner":
        assert "not a ram run" in line and "captioner" in line
    assert ck.read_bytes() == before and not (tmp_path / "e.json").exists()


BAD_FLAGS = [
    ("train", "--batch-size", "-4"),
    ("train", "--batch-size", "0"),
    ("train", "--epochs", "0"),
    ("train", "--steps", "-1"),
    ("train", "--glimpses", "0"),
    ("train", "--glimpses", "1000000"),
    ("train", "--patch", "0"),
    ("train", "--scales", "0"),
    ("train", "--scales", "40"),
    ("train", "--std", "0"),
    ("train", "--std", "-0.1"),
    ("train", "--std", "nan"),
    ("train", "--lr", "0"),
    ("train", "--lr", "-1e-3"),
    ("train", "--lr", "inf"),
    ("train", "--time-budget", "-5"),
    ("train", "--seed", "-1"),
    ("train", "--limit", "0"),
    ("train", "--threads", "0"),
    ("train", "--val", "-1"),
    ("train", "--patience", "0"),
    ("train", "--batch-size", "ten"),
    ("evaluate", "--mc-samples", "-2"),
    ("evaluate", "--limit", "0"),
]


@pytest.mark.parametrize("cmd,flag,value", BAD_FLAGS)
def test_numeric_flags_are_range_checked(tmp_path, capsys, cmd, flag, value):
    extra = (
        ["--out", str(tmp_path / "run")]
        if cmd == "train"
        else ["--checkpoint", str(tmp_path / "none.pt")]
    )
    rc, err = _main(
        ["ram", cmd, f"{flag}={value}", *extra], capsys
    )  # "=": argparse reads "-1e-3" alone as an option
    assert rc == 2
    _one_line(err, flag, repr(value))
    assert list(tmp_path.iterdir()) == []


@needs_mnist
def test_train_refuses_to_replace_a_run(tmp_path, capsys):
    argv = [
        "ram",
        "train",
        "--steps",
        "2",
        "--limit",
        "100",
        "--batch-size",
        "20",
        "--out",
        str(tmp_path),
        "--quiet",
        "--device",
        "cpu",
    ]
    assert _main(argv, capsys)[0] == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    rc, err = _main(argv, capsys)
    assert rc == 1 and "--overwrite" in _one_line(err, str(tmp_path), "ram.pt")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert _main(argv + ["--overwrite"], capsys)[0] == 0
    rc, err = _main(argv + ["--overwrite", "--resume"], capsys)  # contradictory
    assert rc == 1 and "give one of them" in _one_line(err, "--resume", "--overwrite")


def _md5s(folder) -> dict:
    return {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in folder.iterdir()}


def test_resume_without_ram_pt_is_refused(tmp_path, capsys):
    """--resume where there is no ram.pt to continue: a folder whose run lost its
    ram.pt (its best.pt and metrics.json stay as they were) and a mistyped folder
    (not created) are each one line, before any data is read."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "best.pt").write_bytes(b"the earlier run's best weights")
    (run / "metrics.json").write_text('{"test_error": 0.01}')
    before = _md5s(run)
    argv = ["ram", "train", "--steps", "2", "--quiet", "--device", "cpu", "--resume"]
    rc, err = _main(argv + ["--out", str(run)], capsys)
    assert rc == 1 and "no run to resume" in _one_line(err, str(run), "ram.pt")
    assert _md5s(run) == before
    typo = tmp_path / "rnu"
    rc, err = _main(argv + ["--out", str(typo)], capsys)
    assert rc == 1 and "no run to resume" in _one_line(err, str(typo), "ram.pt")
    assert not typo.exists()
    cfg, tr, te = _tiny(steps=1)  # the same from Python
    with pytest.raises(InputError, match="no run to resume"):
        train_ram(cfg, out=run, resume=True, train_data=tr, test_data=te)
    assert _md5s(run) == before


def test_evaluate_from_random_first_glimpses():
    cfg, tr, te = _tiny(steps=1)
    model = cfg.model()
    l0 = torch.rand(5, 2) * 2 - 1
    x = te.batch(np.arange(5))[0]
    assert torch.equal(
        model(x, sample=False, l0=l0).l[:, 0], l0
    )  # the given l_0 is where it looks first
    a, b = (
        evaluate_ram(model, te, start="random", seed=3),
        evaluate_ram(model, te, start="random", seed=3),
    )
    assert a == b and a["start"] == "random" and a["seed"] == 3  # seeded: reproducible
    assert not torch.allclose(
        model(x, sample=False, l0=l0).logits, model(x, sample=False).logits
    )  # the first glimpse matters
    with pytest.raises(ValueError, match="start"):
        evaluate_ram(model, te, start="corner")
