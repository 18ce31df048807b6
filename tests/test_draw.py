"""DRAW (sat_tutorial.draw, sat_tutorial.draw_training): filterbank invariants,
read/write adjointness, gradients, the KL term, the .amat reader, the CLI."""

import argparse, json, math, os
from pathlib import Path

import numpy as np
import pytest
import torch

from sat_tutorial.core import InputError, data_root
from sat_tutorial.checkpoints import load_checkpoint
from sat_tutorial.draw import (
    DRAW,
    FIXED_SOURCE,
    attention_params,
    draw_loss,
    filterbank,
    generate_images,
    kl_standard_normal,
    load_binarized_mnist,
    marginal_nll,
    read_glimpse,
    write_patch,
    BinaryImages,
)
from sat_tutorial.binarized_mnist import parse_amat
from sat_tutorial.draw_cli import add_cli
from sat_tutorial.draw_training import batch_indices, evaluate_draw, train_draw

torch.set_num_threads(1)
A, B, N = 9, 6, 4  # a non-square image: an A/B or X/Y mix-up changes the results
HAVE_FIXED = (data_root() / "binarized_mnist" / "binarized_mnist_test.amat.gz").exists()
needs_fixed = pytest.mark.skipif(
    not HAVE_FIXED, reason="binarized_mnist/*.amat.gz not found under SAT_TUTORIAL_DATA"
)


def _filters(bs=5, seed=0, N=N, A=A, B=B, scale=0.5):
    g = torch.Generator().manual_seed(seed)
    em = torch.randn(bs, 5, dtype=torch.float64, generator=g) * scale
    p = attention_params(em, A, B, N)
    return p, filterbank(*p[:4], N, A, B)


def test_attention_params_rescaling():
    g_X, g_Y, s2, d, gam = attention_params(torch.zeros(2, 5), A, B, N)
    assert torch.allclose(g_X, torch.tensor((A + 1) / 2)) and torch.allclose(
        g_Y, torch.tensor((B + 1) / 2)
    )
    assert torch.allclose(
        d * (N - 1), torch.tensor(float(max(A, B) - 1))
    )  # δ̃ = 1 spans the image
    assert torch.allclose(s2, torch.ones(2)) and torch.allclose(gam, torch.ones(2))
    g_X, g_Y, *_ = attention_params(torch.tensor([[-1.0, 1.0, 0.0, 0.0, 0.0]]), A, B, N)
    assert torch.allclose(g_X, torch.zeros(1)) and torch.allclose(
        g_Y, torch.tensor([B + 1.0])
    )
    assert torch.isfinite(
        torch.stack(attention_params(torch.zeros(1, 5), A, B, 1))
    ).all()  # N = 1 stays finite


def test_filterbank_rows_sum_to_one_and_match_exp_over_Z():
    (g_X, g_Y, s2, d, _), (F_X, F_Y) = _filters()
    assert F_X.shape == (5, N, A) and F_Y.shape == (5, N, B)
    assert torch.allclose(
        F_X.sum(-1), torch.ones(5, N, dtype=torch.float64), atol=1e-12
    )
    assert torch.allclose(
        F_Y.sum(-1), torch.ones(5, N, dtype=torch.float64), atol=1e-12
    )
    i = torch.arange(1, N + 1, dtype=torch.float64)
    for mu_c, F, size in ((g_X, F_X, A), (g_Y, F_Y, B)):
        mu = mu_c[:, None] + (i - N / 2 - 0.5) * d[:, None]
        pix = torch.arange(1, size + 1, dtype=torch.float64)
        E = torch.exp(-((pix - mu[..., None]) ** 2) / (2 * s2[:, None, None]))
        assert torch.allclose(F, E / E.sum(-1, keepdim=True), atol=1e-12)


def test_filterbank_far_outside_image_is_finite():
    F_X, F_Y = filterbank(
        torch.tensor([-500.0]),
        torch.tensor([900.0]),
        torch.tensor([0.1]),
        torch.tensor([1.0]),
        3,
        28,
        28,
    )
    assert torch.isfinite(F_X).all() and torch.isfinite(F_Y).all()
    assert torch.allclose(F_X.sum(-1), torch.ones(1, 3))


def test_batched_equals_one_image_at_a_time():
    p, (F_X, F_Y) = _filters(bs=4)
    x = torch.rand(4, 2, B, A, dtype=torch.float64)
    r = read_glimpse(x, F_X, F_Y, p[4])
    for k in range(4):
        Fx, Fy = filterbank(*(v[k : k + 1] for v in p[:4]), N, A, B)
        assert torch.allclose(F_X[k : k + 1], Fx) and torch.allclose(F_Y[k : k + 1], Fy)
        for c in range(2):
            assert torch.allclose(
                r[k, c], p[4][k] * Fy[0] @ x[k, c] @ Fx[0].T, atol=1e-12
            )


def test_write_is_adjoint_of_read():
    p, (F_X, F_Y) = _filters(bs=6, seed=1)
    x = torch.rand(6, 1, B, A, dtype=torch.float64)
    w = torch.randn(6, N, N, dtype=torch.float64)
    one = torch.ones(6, dtype=torch.float64)
    lhs = (read_glimpse(x, F_X, F_Y, one)[:, 0] * w).sum((1, 2))  # <F_Y x F_X^T, w>
    rhs = (x[:, 0] * write_patch(w, F_X, F_Y, one)).sum((1, 2))  # <x, F_Y^T w F_X>
    assert torch.allclose(lhs, rhs, atol=1e-12)
    # with intensities: write conserves mass Σw/γ̂
    assert torch.allclose(
        write_patch(w, F_X, F_Y, p[4]).sum((1, 2)), w.sum((1, 2)) / p[4], atol=1e-10
    )


def test_identity_filterbank():
    n = 7
    p = attention_params(
        torch.tensor([[0.0, 0.0, math.log(1e-2), 0.0, 0.0]], dtype=torch.float64),
        n,
        n,
        n,
    )
    F_X, F_Y = filterbank(*p[:4], n, n, n)
    assert torch.allclose(F_X[0], torch.eye(n, dtype=torch.float64), atol=1e-12)
    x = torch.rand(1, 1, n, n, dtype=torch.float64)
    assert torch.allclose(read_glimpse(x, F_X, F_Y, p[4]), x, atol=1e-12)


def test_gradcheck_attention_parameters():
    def read_f(e, x):
        p = attention_params(e, A, B, N)
        return read_glimpse(x, *filterbank(*p[:4], N, A, B), p[4])

    def write_f(e, w):
        p = attention_params(e, A, B, N)
        return write_patch(w, *filterbank(*p[:4], N, A, B), p[4])

    g = torch.Generator().manual_seed(3)
    e = (torch.randn(3, 5, dtype=torch.float64, generator=g) * 0.5).requires_grad_()
    x = torch.rand(3, 2, B, A, dtype=torch.float64, generator=g).requires_grad_()
    w = torch.randn(3, N, N, dtype=torch.float64, generator=g).requires_grad_()
    assert torch.autograd.gradcheck(read_f, (e, x), eps=1e-6, atol=1e-7)
    assert torch.autograd.gradcheck(write_f, (e, w), eps=1e-6, atol=1e-7)


def test_kl_matches_closed_form_and_monte_carlo():
    g = torch.Generator().manual_seed(0)
    T, bs, Z = 4, 3, 6
    mu = torch.randn(T, bs, Z, dtype=torch.float64, generator=g)
    ls = torch.randn(T, bs, Z, dtype=torch.float64, generator=g) * 0.5
    Nrm = torch.distributions.Normal
    assert torch.allclose(
        kl_standard_normal(mu, ls),
        torch.distributions.kl_divergence(Nrm(mu, ls.exp()), Nrm(0.0, 1.0)),
        atol=1e-12,
    )
    S = 100_000
    z = mu + ls.exp() * torch.randn(S, T, bs, Z, dtype=torch.float64, generator=g)
    lr = (Nrm(mu, ls.exp()).log_prob(z) - Nrm(0.0, 1.0).log_prob(z)).sum(
        (1, 3)
    )  # (S, bs)
    mc, se = lr.mean(0), lr.std(0) / math.sqrt(S)
    L_z = kl_standard_normal(mu, ls).sum((0, 2))
    assert ((L_z - mc).abs() < 4 * se).all()
    assert (
        (L_z + (Z - 1) * T / 2 - mc).abs() > 20 * se
    ).all()  # the constant −T/2 (instead of −TZ/2) is detectably wrong


def test_model_shapes_loss_and_gradients():
    torch.manual_seed(0)
    x = (torch.rand(4, 784) < 0.3).float()
    for attention in (True, False):
        m = DRAW(T=3, read_n=2, write_n=3, z_dim=5, hidden=12, attention=attention)
        out = m(x, record=True)
        assert (
            out.c_T.shape == (4, 28, 28)
            and out.mu.shape == (3, 4, 5)
            and out.log_sigma.shape == (3, 4, 5)
        )
        assert out.canvases.shape == (3, 4, 28, 28)
        assert (out.read is None) == (not attention) and (out.write is None) == (
            not attention
        )
        L_x, L_z = draw_loss(out, x)
        assert (
            L_x.shape == (4,)
            and L_z.shape == (4,)
            and (L_x > 0).all()
            and (L_z >= 0).all()
        )
        q = torch.sigmoid(out.c_T.flatten(1))
        assert torch.allclose(
            L_x, -(x * q.log() + (1 - x) * (1 - q).log()).sum(1), rtol=1e-4
        )
        (L_x + L_z).mean().backward()
        assert all(
            p.grad is not None and torch.isfinite(p.grad).all() for p in m.parameters()
        )
        assert all(p.grad.abs().sum() > 0 for p in m.parameters())
        g = generate_images(m, 3)
        assert g.canvases.shape == (3, 3, 28, 28) and g.mu is None
        assert torch.allclose(g.canvases[-1], torch.sigmoid(g.c_T))


def test_fit_lowers_the_bound_on_a_small_batch():
    torch.manual_seed(0)
    data = BinaryImages(
        (torch.rand(64, 784) < torch.linspace(0.05, 0.5, 784)).to(torch.uint8),
        "synthetic",
    )
    m = DRAW(T=3, read_n=2, write_n=3, z_dim=4, hidden=16)
    before = evaluate_draw(m, data)["nll_bound"]
    train_draw(m, data, steps=60, batch_size=32, lr=1e-2)
    after = evaluate_draw(m, data)["nll_bound"]
    assert after < before - 100, (before, after)


def test_batch_indices_are_resumable_permutations():
    seen = torch.cat([batch_indices(100, 10, s, seed=5) for s in range(10)])
    assert sorted(seen.tolist()) == list(range(100))  # one epoch = a permutation
    assert torch.equal(
        batch_indices(100, 10, 13, seed=5), batch_indices(100, 10, 13, seed=5)
    )
    assert not torch.equal(
        batch_indices(100, 10, 0, seed=5), batch_indices(100, 10, 10, seed=5)
    )  # new epoch, new order


def test_parse_amat():
    assert parse_amat(b"0 1 1\n1 0 0\n", width=3).tolist() == [[0, 1, 1], [1, 0, 0]]
    assert parse_amat(b"0 1 1\r\n1  0 0", width=3).tolist() == [[0, 1, 1], [1, 0, 0]]
    with pytest.raises(ValueError, match="characters"):
        parse_amat(b"0 1 2\n0 0 0\n", width=3)
    with pytest.raises(ValueError, match="expected"):
        parse_amat(b"0 1\n0 0 0\n", width=3)
    with pytest.raises(ValueError, match="expected 2 rows"):
        parse_amat(b"0 1 1\n1 0\n", width=3)
    assert parse_amat(b"0  1 1\n\n1 0 0\n", width=3).tolist() == [
        [0, 1, 1],
        [1, 0, 0],
    ]  # blank lines, double spaces
    with pytest.raises(ValueError, match="characters"):
        parse_amat(b"0 1 2\n0 1 1\n", width=3)  # canonical length, bad value


@needs_fixed
def test_loader_on_real_files():
    tr, va, te = (load_binarized_mnist(s) for s in ("train", "valid", "test"))
    assert [len(tr), len(va), len(te)] == [50_000, 10_000, 10_000]
    assert (
        tr.source == FIXED_SOURCE
        and not tr.dynamic
        and tr.x.shape == (50_000, 784)
        and tr.x.dtype == torch.uint8
    )
    assert set(torch.unique(te.x).tolist()) == {0, 1}
    assert (
        195 < marginal_nll(tr, te) < 215
    )  # per-pixel Bernoulli NLL of binarised MNIST is about 206 nats


def _parser():
    p = argparse.ArgumentParser(prog="sat-tutorial")
    add_cli(p.add_subparsers(dest="command"))
    return p


TINY = [
    "-T",
    "2",
    "--hidden",
    "8",
    "--z-dim",
    "2",
    "--read-n",
    "2",
    "--write-n",
    "3",
    "--device",
    "cpu",
    "--batch-size",
    "16",
]


@needs_fixed
def test_cli_train_resume_and_sample(tmp_path, capsys):
    p = _parser()
    run = lambda *a: (lambda args: args.func(args))(p.parse_args(list(a)))
    # 4 steps in one go, and 2 + 2 with --resume: exactly the same weights
    assert (
        run("draw", "train", *TINY, "--steps", "4", "--out", str(tmp_path / "a")) == 0
    )
    assert (
        run("draw", "train", *TINY, "--steps", "2", "--out", str(tmp_path / "b")) == 0
    )
    assert (
        run(
            "draw",
            "train",
            *TINY,
            "--steps",
            "4",
            "--resume",
            "--out",
            str(tmp_path / "b"),
        )
        == 0
    )
    assert "resuming from" in capsys.readouterr().out
    ca, cb = (
        load_checkpoint(tmp_path / "a" / "checkpoint.pt"),
        load_checkpoint(tmp_path / "b" / "checkpoint.pt"),
    )
    assert ca["step"] == cb["step"] == 4 and ca["losses"] == cb["losses"]
    assert all(torch.equal(ca["model"][k], cb["model"][k]) for k in ca["model"])
    met = json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert (
        met["steps"] == 4
        and met["data"] == FIXED_SOURCE
        and met["test_images"] == 10_000
    )
    assert met["test_nll_bound_nats"] == pytest.approx(
        met["test_L_x"] + met["test_L_z"]
    )
    assert met["paper_nll_bound_nats"] == {"attention": 80.97, "no_attention": 87.40}
    # a different model on --resume is refused
    with pytest.raises(InputError, match="was trained with"):
        run(
            "draw",
            "train",
            *TINY,
            "--hidden",
            "9",
            "--steps",
            "5",
            "--resume",
            "--out",
            str(tmp_path / "b"),
        )
    # non-attentive variant
    assert (
        run(
            "draw",
            "train",
            *TINY,
            "--no-attention",
            "--steps",
            "1",
            "--out",
            str(tmp_path / "c"),
        )
        == 0
    )
    assert (
        load_checkpoint(tmp_path / "c" / "checkpoint.pt")["config"]["attention"]
        is False
    )
    # sample
    png = tmp_path / "s.png"
    assert (
        run(
            "draw",
            "sample",
            "--checkpoint",
            str(tmp_path / "a" / "checkpoint.pt"),
            "--n",
            "3",
            "--out",
            str(png),
        )
        == 0
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(InputError, match="missing.pt does not exist"):
        run(
            "draw",
            "sample",
            "--checkpoint",
            str(tmp_path / "missing.pt"),
            "--out",
            str(png),
        )


def test_cli_parser_defaults_are_the_paper_model():
    args = _parser().parse_args(["draw", "train"])
    assert (
        args.glimpses,
        args.read_n,
        args.write_n,
        args.z_dim,
        args.hidden,
        args.attention,
    ) == (64, 2, 5, 100, 256, True)
    assert _parser().parse_args(["draw", "train", "--no-attention"]).attention is False
    with pytest.raises(SystemExit):
        _parser().parse_args(["draw"])
