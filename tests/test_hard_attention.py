"""Invariants of stochastic hard attention: the paper's model (notebook 07: sampler,
protocol, determinism, baseline,
estimator) and its options (notebook 07b: credit, baselines, warm-up, the coin's
schedule, marginal reads)."""

import math

import pytest
import torch
import torch.nn.functional as F

from sat_tutorial.core import seed_everything
from sat_tutorial.checkpoints import load_checkpoint, save_checkpoint
from sat_tutorial.data import Vocab
from sat_tutorial.hard_attention import (
    HardAttentionCaptioner,
    attention_entropy,
    hard_context,
    location_log_prob,
    location_log_probs,
    location_sequences,
    lower_bound_by_enumeration,
    reinforce_surrogate,
    sample_locations,
)
from sat_tutorial.hard_attention_beyond import (
    CREDITS,
    ArgmaxReads,
    ExpectedReads,
    ExtendedHardAttentionCaptioner,
    Reinforce,
    RewardToGo,
    SampledReads,
    credited_surrogate,
    rewards_to_go,
    step_hard_context,
)
from sat_tutorial.hard_attention_marginal import Marginal, MarginalReads
from sat_tutorial.soft_attention import caption_nll, target_mask, word_nll
from sat_tutorial.soft_attention_beyond import StepOperand

Extended = ExtendedHardAttentionCaptioner


def small_model(cls=Extended, **kw):
    seed_everything(0)
    V, D, B, L = 20, 8, 4, 6
    m = cls(V, D, 10, 12, 9, 0.0, **kw)  # positional: the protocol's constructor
    feats = torch.randn(B, L, D)
    lengths = torch.tensor([7, 5, 3, 7])
    caps = torch.randint(4, V, (B, 7))
    caps[:, 0] = Vocab.start
    for b, n in enumerate(lengths):
        caps[b, n - 1] = Vocab.end
        caps[b, n:] = Vocab.pad
    return m, feats, caps, lengths


def test_sampler_frequencies():
    # 20,000 draws from each of two distributions: Pearson's statistic is χ² with
    # (#non-zero − 1) dof; p > 0.001
    seed_everything(0)
    alpha = torch.tensor([[0.05, 0.1, 0.2, 0.3, 0.35], [0.6, 0.0, 0.1, 0.1, 0.2]])
    n = 20_000
    s = sample_locations(alpha.repeat(n, 1)).view(n, 2)
    counts = F.one_hot(s, 5).sum(0).double()
    assert counts[1, 1] == 0  # zero probability is never drawn
    chi2 = (
        ((counts - n * alpha) ** 2 / (n * alpha).clamp_min(1e-12))
        .where(alpha > 0, torch.zeros(()))
        .sum(-1)
    )
    dof = (alpha > 0).sum(-1).double() - 1
    assert (torch.special.gammaincc(dof / 2, chi2 / 2) > 1e-3).all(), chi2


def test_log_prob_and_entropy():
    seed_everything(1)
    al = torch.randn(2, 3, 4).softmax(-1)
    s = torch.tensor([[1, 3, 0], [2, 2, 1]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    cat = torch.distributions.Categorical(probs=al)
    torch.testing.assert_close(
        location_log_prob(al, s, mask), (cat.log_prob(s) * mask).sum(1)
    )
    torch.testing.assert_close(
        attention_entropy(al, mask), (cat.entropy() * mask).sum(1)
    )


def test_hard_context_with_step_operand():
    """ẑ_t = a_{s_t} as a lookup; k rows (beams) per image; in teacher forcing (a
    `StepOperand`, notebook 07b's `step_hard_context`) the same values and gradient,
    and the lookup itself for plain annotations."""
    a = torch.randn(4, 5, 3)
    s, s2 = torch.tensor([0, 4, 2, 2]), torch.tensor([0, 4, 1, 1, 2, 3, 2, 0])
    assert torch.equal(
        hard_context(a, s), (F.one_hot(s, 5).float()[:, :, None] * a).sum(1)
    )
    assert torch.equal(hard_context(a, s2), hard_context(a.repeat_interleave(2, 0), s2))
    for idx in (s, s2):
        a1, a2 = a.clone().requires_grad_(), a.clone().requires_grad_()
        g = torch.randn(len(idx), 3)
        (hard_context(a1, idx) * g).sum().backward()
        (step_hard_context(StepOperand(a2), idx) * g).sum().backward()
        torch.testing.assert_close(a2.grad, a1.grad, atol=1e-6, rtol=1e-6)
    with torch.no_grad():
        assert torch.equal(step_hard_context(StepOperand(a), s2), hard_context(a, s2))
    assert torch.equal(step_hard_context(a, s2), hard_context(a, s2))


def test_surrogate_gradient():
    log_py = torch.tensor([-12.0, -7.0], requires_grad=True)
    log_ps = torch.tensor([-3.0, -1.0], requires_grad=True)
    H = torch.tensor([4.0, 2.0], requires_grad=True)
    reinforce_surrogate(
        log_py, log_ps, H, -10.0, torch.tensor([1.0, 0.0]), 0.5, 0.01
    ).sum().backward()
    torch.testing.assert_close(log_py.grad, torch.ones(2))
    torch.testing.assert_close(log_ps.grad, torch.tensor([-1.0, 0.0]))
    torch.testing.assert_close(H.grad, torch.full((2,), 0.01))


@pytest.mark.parametrize("cls", [HardAttentionCaptioner, Extended])
def test_protocol_shapes_and_forced_locations(cls):
    m, feats, caps, lengths = small_model(cls)
    B, T, L = 4, 6, 6
    logits, alpha, s = m.rollout(feats, caps, lengths)
    assert logits.shape == (B, T, 20) and alpha.shape == (B, T, L) and s.shape == (B, T)
    assert m(feats, caps, lengths)[0].shape == (B, T, 20)
    st = m.init_state(feats)
    lp, st, al = m.step(caps[:, 0], st)
    assert lp.shape == (B, 20) and al.shape == (B, L)
    s_given = torch.randint(0, L, (B, T))
    l1, _, s1 = m.rollout(feats, caps, lengths, s=s_given)
    l2, _, _ = m.rollout(feats, caps, lengths, s=s_given)
    assert torch.equal(s1, s_given) and torch.equal(
        l1, l2
    )  # given locations: no randomness left
    with pytest.raises(ValueError, match="s must be"):
        m(feats, caps, lengths, s=s_given[:, 1:])
    with pytest.raises(ValueError, match="inference"):
        cls(20, 8, inference="mean")
    with pytest.raises(ValueError, match="inference"):
        HardAttentionCaptioner(20, 8, inference="marginal")  # not the paper's


@pytest.mark.parametrize(
    "cls,mode",
    [
        (HardAttentionCaptioner, "argmax"),
        (HardAttentionCaptioner, "expected"),
        (Extended, "argmax"),
        (Extended, "expected"),
        (Extended, "marginal"),
    ],
)
def test_eval_deterministic_and_step_replays_forward(cls, mode):
    m, feats, caps, lengths = small_model(cls, inference=mode)
    m.eval()
    rng = torch.get_rng_state()
    with torch.no_grad():
        logits, alpha = m(feats, caps, lengths)
        assert torch.equal(torch.get_rng_state(), rng)
        assert torch.equal(m(feats, caps, lengths)[0], logits)
        st = m.init_state(feats)
        for t in range(caps.shape[1] - 1):
            lp, st, al = m.step(caps[:, t], st)
            torch.testing.assert_close(
                lp, logits[:, t].log_softmax(-1), atol=1e-5, rtol=1e-5
            )
            torch.testing.assert_close(al, alpha[:, t], atol=1e-6, rtol=1e-6)
    if mode == "argmax":
        assert torch.equal(m.rollout(feats, caps, lengths)[2], alpha.argmax(-1))


@pytest.mark.parametrize("beta_gate", [False, True])
def test_marginal_first_step_is_the_exact_mixture_and_k1_is_the_argmax_joint(beta_gate):
    """'marginal' decoding: step 0 is log Σ_i α_i p(y | s_0 = i) (each location forced),
    and marginal_k = 1 adds log max α to argmax reads."""
    m, feats, caps, lengths = small_model(beta_gate=beta_gate)
    m.eval()
    B, T, L = 4, 6, 6
    with torch.no_grad():
        alpha0 = m(feats, caps, lengths)[1][:, 0]  # argmax mode: the same α_0
        forced = torch.stack(
            [
                m.rollout(feats, caps, lengths, s=torch.full((B, T), i))[0][
                    :, 0
                ].log_softmax(-1)
                for i in range(L)
            ],
            1,
        )  # (B, L, V)
        argmax_lp = m(feats, caps, lengths)[0].log_softmax(-1)
        m.set_reads("marginal")
        lp = m(feats, caps, lengths)[0]
        torch.testing.assert_close(
            lp[:, 0],
            (alpha0[..., None].log() + forced).logsumexp(1),
            atol=1e-5,
            rtol=1e-5,
        )
        torch.testing.assert_close(
            lp.exp().sum(-1), torch.ones(B, T), atol=1e-5, rtol=1e-5
        )  # K = L: a distribution
        m.set_reads(MarginalReads(1))
        alpha = m(feats, caps, lengths)[1]
        torch.testing.assert_close(
            m(feats, caps, lengths)[0],
            argmax_lp + alpha.amax(-1, keepdim=True).log(),
            atol=1e-5,
            rtol=1e-5,
        )
    with pytest.raises(ValueError, match="marginal_k"):
        Extended(20, 8, marginal_k=0)


def test_training_samples_differ():
    m, feats, caps, lengths = small_model(HardAttentionCaptioner)
    m.train()
    assert (
        m.rollout(feats, caps, lengths)[2] != m.rollout(feats, caps, lengths)[2]
    ).any()


@pytest.mark.parametrize("cls", [HardAttentionCaptioner, Extended])
def test_baseline_buffer(tmp_path, cls):
    m, feats, caps, lengths = small_model(cls, p_expected=0.0)
    m.train()

    def replay_reward(seed):
        seed_everything(seed)
        torch.rand(feats.shape[0])  # the loss draws the per-image coin first
        with torch.no_grad():
            logits, _, _ = m.rollout(feats, caps, lengths)
        return float(-caption_nll(logits, caps, lengths).mean())

    r1, r2 = replay_reward(3), replay_reward(4)
    seed_everything(3)
    _, st1 = m.loss(feats, caps, lengths)
    assert st1["baseline"] == 0.0 and math.isclose(float(m.baseline), r1, rel_tol=1e-5)
    seed_everything(4)
    _, st2 = m.loss(feats, caps, lengths)
    assert math.isclose(st2["baseline"], r1, rel_tol=1e-5)  # the advantage used b_{k−1}
    assert (
        math.isclose(float(m.baseline), 0.9 * r1 + 0.1 * r2, rel_tol=1e-5)
        and int(m.baseline_steps) == 2
    )
    m.eval()
    m.loss(feats, caps, lengths)
    assert int(m.baseline_steps) == 2
    save_checkpoint({"model": m.state_dict()}, tmp_path / "ck.pt")
    m2 = cls(20, 8, 10, 12, 9, 0.0)
    m2.load_state_dict(load_checkpoint(tmp_path / "ck.pt")["model"])
    assert float(m2.baseline) == float(m.baseline) and int(m2.baseline_steps) == 2


@pytest.mark.parametrize("credit", ["caption", "reward_to_go"])
def test_baseline_values_are_the_definitions(credit):
    """What `loss` subtracts: b_{k−1} per caption, or b × the words from step t on; log
    p(y | a, Σ α a) per caption, or from step t on."""
    m, feats, caps, lengths = small_model(credit=credit)
    m.baseline.fill_(-3.5)
    n_from = (lengths - 1)[:, None] - torch.arange(
        caps.shape[1] - 1
    )  # words from step t on (targets: T − 1)
    ma = m.objective.baseline_values(m, feats, caps, lengths, "moving_average")
    ex = m.objective.baseline_values(m, feats, caps, lengths, "expected")
    per_word = m.expected_reward(
        feats, caps, lengths, per_word=True
    )  # (B, T − 1), zero past each caption
    assert torch.equal(
        per_word[target_mask(caps, lengths) == 0],
        torch.zeros(int((target_mask(caps, lengths) == 0).sum())),
    )
    if credit == "caption":
        assert ma.dim() == 0 and float(ma) == -3.5
        torch.testing.assert_close(ex, m.expected_reward(feats, caps, lengths))
    else:
        torch.testing.assert_close(ma, -3.5 * n_from.clamp(min=0).float())
        torch.testing.assert_close(
            ex[:, 0], per_word.sum(1)
        )  # b_0: the whole caption's
        torch.testing.assert_close(ex, per_word.flip(1).cumsum(1).flip(1))
    m.objective = CREDITS[credit]("expected")
    assert torch.equal(m.objective.baseline_values(m, feats, caps, lengths), ex)
    with pytest.raises(ValueError, match="kind must be one of"):
        m.objective.baseline_values(m, feats, caps, lengths, "average")


def test_expected_warmup_reads_the_soft_context_and_leaves_the_baseline_alone():
    """`expected_warmup=2`: two training steps with every image on Σ α a (loss = the
    soft model's), then sampling starts."""
    m, feats, caps, lengths = small_model(
        p_expected=0.0, lambda_e=0.0, expected_warmup=2
    )
    m.train()
    n_words = (lengths - 1).sum()
    for k in range(2):
        assert m.warming_up()
        with torch.no_grad():
            logits, _, _ = m.rollout(
                feats, caps, lengths, expected=torch.ones(len(feats), dtype=torch.bool)
            )
        soft_loss = caption_nll(logits, caps, lengths).sum() / n_words
        loss, st = m.loss(feats, caps, lengths)
        assert st["expected"] == 1.0 and torch.allclose(loss, soft_loss, atol=1e-6)
        assert int(m.baseline_steps) == 0  # no sampled image: b is not updated
    assert not m.warming_up() and int(m.train_steps) == 2
    _, st = m.loss(feats, caps, lengths)
    assert (
        st["expected"] == 0.0 and int(m.baseline_steps) == 1
    )  # p_expected = 0: every image samples now
    m.eval()
    m.loss(feats, caps, lengths)
    assert int(m.train_steps) == 3  # evaluation does not count
    m2 = Extended(20, 8, 10, 12, 9, 0.0, expected_warmup=5)
    m2.load_state_dict(m.state_dict())
    assert int(m2.train_steps) == 3 and m2.warming_up()
    old = {
        k: v for k, v in m.state_dict().items() if k != "train_steps"
    }  # a checkpoint from before the option
    m2 = Extended(20, 8, 10, 12, 9, 0.0, expected_warmup=5)
    m2.load_state_dict(old)
    assert not m2.warming_up()


def tiny_hard_run(**model_kwargs):
    """A 4-step scenes run of a tiny hard-attention model (no validation, no
    intermediate checkpoints)."""
    from sat_tutorial.training import scenes_config

    return scenes_config(
        model="hard",
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
        model_kwargs={"alpha_c": 0.0, "lambda_r": 0.1, **model_kwargs},
    )


def test_expected_warmup_ends_at_the_same_step_after_a_resume(tmp_path):
    """2 steps, stop, 2 more give the weights (and baseline) of 4 straight, with a
    warm-up of 3 that ends in between."""
    from sat_tutorial.fit import fit
    from sat_tutorial.training import load_checkpoint_model

    cfg = tiny_hard_run(expected_warmup=3)
    quiet = dict(progress=False, log=lambda *a: None)
    fit(cfg, tmp_path / "a", **quiet)
    fit(cfg, tmp_path / "b", stop_at=2, **quiet)
    _, half, _, _ = load_checkpoint_model(tmp_path / "b" / "last.pt").model
    assert (
        int(half.train_steps) == 2
        and half.warming_up()
        and int(half.baseline_steps) == 0
    )
    fit(cfg, tmp_path / "b", resume=True, **quiet)
    a, b = (
        load_checkpoint(tmp_path / "a" / "last.pt"),
        load_checkpoint(tmp_path / "b" / "last.pt"),
    )
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    _, model, _, _ = load_checkpoint_model(tmp_path / "a" / "last.pt").model
    assert (
        int(model.train_steps) == 4
        and not model.warming_up()
        and int(model.baseline_steps) == 1
    )  # step 4 only


def test_p_expected_end_moves_the_coin_with_run_progress():
    """`p_expected_end`: P(image reads Σ α a) = p + (p_end − p)·run_progress; without
    it, run_progress changes nothing."""
    m, feats, caps, lengths = small_model(p_expected=0.5, lambda_e=0.0)
    m.run_progress = 0.7
    assert m.expected_share() == 0.5  # the paper's fixed coin
    m.p_expected_end = 0.0
    for progress, share in [
        (0.0, 0.5),
        (0.5, 0.25),
        (1.0, 0.0),
        (1.3, 0.0),
        (-0.2, 0.5),
    ]:
        m.run_progress = progress
        assert m.expected_share() == pytest.approx(share)
    big = [
        x.repeat(500, *[1] * (x.dim() - 1)) for x in (feats, caps, lengths)
    ]  # 2,000 images
    m.train()
    for progress, share in [(0.0, 0.5), (0.6, 0.2), (1.0, 0.0)]:
        m.run_progress = progress
        frac = m.loss(*big)[1]["expected"]
        assert abs(frac - share) <= 4 * math.sqrt(share * (1 - share) / 2000) + 1e-12, (
            progress,
            frac,
        )
    for bad in ({"p_expected_end": 1.5}, {"p_expected": -0.1}):
        with pytest.raises(ValueError, match="must be a probability"):
            small_model(**bad)


def test_fit_gives_the_model_its_progress_and_resume_keeps_it(tmp_path, monkeypatch):
    """`fit` sets run_progress = step / steps before each step; 2 steps, stop, 2 more
    give the weights of 4 straight."""
    from sat_tutorial.fit import fit

    cfg = tiny_hard_run(p_expected=0.5, p_expected_end=0.0)
    seen, share = [], Reinforce.expected_share  # the objective's coin
    monkeypatch.setattr(
        Reinforce,
        "expected_share",
        lambda self, progress: seen.append(progress) or share(self, progress),
    )
    quiet = dict(progress=False, log=lambda *a: None)
    fit(cfg, tmp_path / "a", **quiet)
    assert seen == [0.0, 0.25, 0.5, 0.75]
    seen.clear()
    fit(cfg, tmp_path / "b", stop_at=2, **quiet)
    fit(cfg, tmp_path / "b", resume=True, **quiet)
    assert seen == [0.0, 0.25, 0.5, 0.75]
    a, b = (
        load_checkpoint(tmp_path / "a" / "last.pt"),
        load_checkpoint(tmp_path / "b" / "last.pt"),
    )
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


# --- the estimator against the exact gradient of L_s
# ---------------------------------------------------------


NO_COIN = dict(p_expected=0.0, lambda_e=0.0)  # every image samples; no entropy term


def tiny_setup(cls=Extended, **kw):
    seed_everything(0)
    m = cls(
        6, 4, embed_dim=4, hidden_dim=5, attention_dim=4, dropout=0.0, **NO_COIN, **kw
    )
    m = m.double()
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(2.0)
    f = torch.randn(2, 3, 4, dtype=torch.float64) * 2
    c, l = torch.tensor([[1, 4, 5, 2], [1, 3, 2, 0]]), torch.tensor([4, 3])
    return m, f, c, l


def flat_grad(m):
    return torch.cat(
        [
            (p.grad if p.grad is not None else torch.zeros_like(p)).flatten()
            for p in m.parameters()
        ]
    )


def exact_moments(m, f, c, l, b):
    """Exact mean and covariance of the one-sequence-per-image gradient estimate of the
    loss, by enumeration.
    `b`: one number (per caption; per word with a `RewardToGo` objective, then b_t = b ×
    the words from t on),
    or a list with one baseline per image (a number, or `(T,)` per step)."""
    n_words = int((l - 1).sum())
    mean, cov = 0, 0
    for i in range(f.shape[0]):
        S = location_sequences(int(l[i]) - 1, f.shape[1], c.shape[1] - 1)
        K = len(S)
        ci, li = c[i : i + 1].expand(K, -1), l[i : i + 1].expand(K)
        logits, alpha, _ = m.rollout(f[i : i + 1].expand(K, -1, -1), ci, li, s=S)
        mask, word_logp = target_mask(ci, li), -word_nll(logits, ci, li)
        log_py, log_ps = word_logp.sum(1), location_log_prob(alpha, S, mask)
        b_i = b[i] if isinstance(b, list) else b
        if getattr(getattr(m, "objective", None), "per_step", False):
            if not torch.is_tensor(b_i):
                b_i = b_i * rewards_to_go(mask.to(f.dtype))
            ell = credited_surrogate(
                log_py,
                location_log_probs(alpha, S, mask),
                torch.zeros(K),
                b_i,
                torch.ones(K),
                m.lambda_r,
                reward=rewards_to_go(word_logp),
            )
        else:
            ell = reinforce_surrogate(
                log_py, log_ps, torch.zeros(K), b_i, torch.ones(K), m.lambda_r
            )
        G = []
        for k in range(K):
            m.zero_grad()
            (-ell[k] / n_words).backward(retain_graph=True)
            G.append(flat_grad(m))
        G, p = torch.stack(G), log_ps.detach().exp()
        g_bar = (p[:, None] * G).sum(0)
        mean, cov = mean + g_bar, cov + (p[:, None] * (G - g_bar)).T @ (G - g_bar)
    return mean, cov


def exact_gradient(m, f, c, l):
    L_s, log_marginal = lower_bound_by_enumeration(m, f, c, l)
    assert (L_s < log_marginal).all()  # Jensen
    m.zero_grad()
    (-L_s.sum() / int((l - 1).sum())).backward()
    return flat_grad(m)


def mc_mean(m, f, c, l, R, K):
    out = []
    for _ in range(K):
        m.zero_grad()
        m.loss(f.repeat(R, 1, 1), c.repeat(R, 1), l.repeat(R))[0].backward()
        out.append(flat_grad(m))
    return torch.stack(out).mean(0)


def chi2_test(err, cov, n):
    """Whitened error in the range of the exact covariance: statistic, dof, p-value, and
    the max error outside it."""
    lam, U = torch.linalg.eigh(cov)
    keep = lam > 1e-13 * lam.max()
    U, lam = U[:, keep], lam[keep]
    chi2 = float((((U.T @ err) / (lam / n).sqrt()) ** 2).sum())
    r = int(keep.sum())
    p = float(torch.special.gammaincc(torch.tensor(r / 2), torch.tensor(chi2 / 2)))
    return chi2, r, p, float((err - U @ (U.T @ err)).abs().max())


@pytest.mark.parametrize(
    "cls,kw",
    [
        (HardAttentionCaptioner, {}),
        (Extended, dict(beta_gate=True)),
        (Extended, dict(credit="reward_to_go")),
    ],
)
def test_estimator_matches_enumeration(cls, kw):
    # 5,000 copies of two images (10,000 sampled sequences). The error of the mean lies
    # in the ≤ 34-dimensional range
    # of the exact covariance; whitened it is χ²_r, so p > 0.001 fails a correct
    # estimator 0.1% of the time. Per
    # coordinate: |error| < 4.5 SE (union bound over ~500 coordinates: ≤ 0.3%).
    m, f, c, l = tiny_setup(cls, **kw)
    g_exact = exact_gradient(m, f, c, l)
    b = (
        -5.6 if kw.get("credit") == "reward_to_go" else -14.0
    )  # per caption; per word (5 words in 2 captions)
    mean, cov = exact_moments(m, f, c, l, b)
    torch.testing.assert_close(mean, g_exact, atol=1e-10, rtol=0)  # unbiased, exactly
    m.baseline.fill_(b)
    m.baseline_steps.fill_(1)
    m.baseline_decay = 1.0
    R, K = 500, 10
    seed_everything(1)
    err = mc_mean(m, f, c, l, R, K) - g_exact
    se = (cov.diagonal().clamp_min(0) / (R * K)).sqrt()
    nz = se > 1e-12
    assert (err[nz] / se[nz]).abs().max() < 4.5
    chi2, r, p, outside = chi2_test(err, cov, R * K)
    assert p > 1e-3 and outside < 1e-10, (chi2, r, p, outside)
    # the same test rejects the pathwise-only gradient (no REINFORCE term) at this
    # sample size
    m.lambda_r = 0.0
    seed_everything(2)
    err0 = mc_mean(m, f, c, l, R, K) - g_exact
    _, cov0 = exact_moments(m, f, c, l, b)
    assert chi2_test(err0, cov0, R * K)[2] < 1e-10


def test_baseline_reduces_variance_not_mean():
    """Exactly (enumeration), and through `loss` at b = 0 (notebook 07's Monte-Carlo
    test): unbiased, 4× the variance of b = −14."""
    m, f, c, l = tiny_setup(HardAttentionCaptioner)
    m0, cov0 = exact_moments(m, f, c, l, 0.0)
    m1, cov1 = exact_moments(m, f, c, l, -14.0)
    torch.testing.assert_close(m0, m1, atol=1e-10, rtol=0)
    assert cov1.trace() < cov0.trace() / 4
    g_exact = exact_gradient(m, f, c, l)
    m.baseline.fill_(0.0)
    m.baseline_steps.fill_(1)
    m.baseline_decay = 1.0
    R, K = 500, 10
    seed_everything(4)
    err = mc_mean(m, f, c, l, R, K) - g_exact
    se = (cov0.diagonal().clamp_min(0) / (R * K)).sqrt()
    nz = se > 1e-12
    assert (err[nz] / se[nz]).abs().max() < 4.5
    chi2, r, p, outside = chi2_test(err, cov0, R * K)
    assert p > 1e-3 and outside < 1e-10, (chi2, r, p, outside)


def test_expected_baseline_with_caption_credit_is_unbiased():
    """baseline_kind='expected' with the paper's credit: exactly unbiased, and `loss`
    (which computes b_i itself) passes the Monte-Carlo test."""
    m, f, c, l = tiny_setup()
    g_exact = exact_gradient(m, f, c, l)
    b_img = [
        float(m.expected_reward(f[i : i + 1], c[i : i + 1], l[i : i + 1]))
        for i in range(2)
    ]
    mean, cov = exact_moments(m, f, c, l, b_img)
    torch.testing.assert_close(mean, g_exact, atol=1e-10, rtol=0)
    m.objective = Reinforce("expected", **NO_COIN)
    seed_everything(6)
    err = mc_mean(m, f, c, l, 500, 10) - g_exact
    chi2, r, p, outside = chi2_test(err, cov, 5000)
    assert p > 1e-3 and outside < 1e-10, (chi2, r, p, outside)


def test_reward_to_go_unbiased_and_lower_variance():
    # exact, by enumeration: crediting s̃_t with G_t = Σ_{t'≥t} log p(y_t'|…) instead of
    # log p(y|s̃, a) leaves the mean
    # at the exact gradient of L_s, with no baseline, the moving-average one (per word),
    # or the per-image expected one;
    # on this tiny model it also lowers the variance (a measured fact about this model,
    # not a theorem)
    m, f, c, l = tiny_setup()
    g_exact = exact_gradient(m, f, c, l)
    traces = {}
    for credit, b in (
        ("caption", 0.0),
        ("reward_to_go", 0.0),
        ("caption", -14.0),
        ("reward_to_go", -5.6),
    ):
        m.objective = CREDITS[credit](**NO_COIN)
        mean, cov = exact_moments(m, f, c, l, b)
        torch.testing.assert_close(mean, g_exact, atol=1e-10, rtol=0)
        traces[credit, b] = float(cov.trace())
    assert (
        traces["reward_to_go", 0.0] < traces["caption", 0.0]
        and traces["reward_to_go", -5.6] < traces["caption", -14.0]
    )
    exp_b = [
        rewards_to_go(
            m.expected_reward(f[i : i + 1], c[i : i + 1], l[i : i + 1], per_word=True)
        )[0]
        for i in range(2)
    ]
    mean, cov = exact_moments(m, f, c, l, exp_b)  # m.objective: RewardToGo() here
    torch.testing.assert_close(mean, g_exact, atol=1e-10, rtol=0)
    # and `loss` itself, with the expected baseline: Monte Carlo within the exact
    # error distribution
    m.objective = RewardToGo("expected", **NO_COIN)
    R, K = 500, 10
    seed_everything(3)
    err = mc_mean(m, f, c, l, R, K) - g_exact
    chi2, r, p, outside = chi2_test(err, cov, R * K)
    assert p > 1e-3 and outside < 1e-10, (chi2, r, p, outside)


def test_reward_to_go_surrogate_gradient():
    # ∂ℓ/∂ log α_{t,s_t} = λ_r (G_t − b_t) for a sampled image, 0 for one that read Σ α
    # a; ∂ℓ/∂ log p(y|s̃) = 1
    word_logp = torch.tensor([[-1.0, -2.0, -3.0], [-4.0, -5.0, 0.0]])
    G = rewards_to_go(word_logp)
    torch.testing.assert_close(G, torch.tensor([[-6.0, -5.0, -3.0], [-9.0, -5.0, 0.0]]))
    log_py = word_logp.sum(1).requires_grad_()
    log_ps = torch.zeros(2, 3, requires_grad=True)
    b = torch.full((2, 3), -1.0)
    credited_surrogate(
        log_py, log_ps, torch.zeros(2), b, torch.tensor([1.0, 0.0]), 0.5, reward=G
    ).sum().backward()
    torch.testing.assert_close(
        log_ps.grad, torch.tensor([[-2.5, -2.0, -1.0], [0.0, 0.0, 0.0]])
    )
    torch.testing.assert_close(log_py.grad, torch.ones(2))
    with pytest.raises(ValueError, match="must match"):
        credited_surrogate(
            log_py, log_ps, torch.zeros(2), 0.0, torch.ones(2), reward=None
        )
    with pytest.raises(ValueError, match="credit must be one of"):
        Extended(10, 4, credit="word")


# --- read policies and objectives as objects (issue 50, item 6) ----------------------


@pytest.mark.parametrize(
    "kw,message",
    [
        (dict(objective="marginal", credit="reward_to_go"), "credit='reward_to_go'"),
        (dict(inference="expected", marginal_k=3), "marginal_k applies"),
        (dict(objective="marginal", expected_warmup=300), "expected_warmup=300"),
        (dict(objective="marginal", p_expected_end=0.0), "p_expected_end=0.0"),
        (dict(objective="marginal", lambda_r=0.1), "lambda_r=0.1"),
        (dict(objective="marginal", baseline_kind="expected"), "baseline_kind"),
        (dict(marginal_k=2), "marginal_k applies"),  # argmax reads by default
        (dict(inference="sample", marginal_k=1), "marginal_k applies"),
        (dict(objective=Marginal(2), credit="reward_to_go"), "credit"),
        (dict(objective=RewardToGo(), baseline_kind="expected"), "give these"),
        (dict(objective="exact"), "objective must be"),
        (dict(objective=ArgmaxReads()), "objective must be"),
        (dict(inference="mean"), "inference (reads) must be one of"),
        (dict(baseline_kind="average"), "baseline_kind must be one of"),
        (dict(inference="marginal", marginal_k=0), "marginal_k must be at least 1"),
    ],
)
def test_options_that_do_not_apply_are_one_line_errors(kw, message):
    with pytest.raises(ValueError) as err:
        Extended(20, 8, **kw)
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_names_build_the_objects():
    "The constructor's names (CLI, old checkpoints) give the objects they name."
    cases = [
        ({}, ArgmaxReads, Reinforce, None),
        (dict(credit="reward_to_go"), ArgmaxReads, RewardToGo, None),
        (dict(inference="marginal", marginal_k=3), MarginalReads, Reinforce, 3),
        (dict(objective="marginal"), MarginalReads, Marginal, None),
        (dict(objective="marginal", marginal_k=4, inference="argmax"), ArgmaxReads,
         Marginal, 4),
        (dict(inference=SampledReads(), objective=RewardToGo("expected")),
         SampledReads, RewardToGo, None),
    ]  # fmt: skip
    for kw, reads, objective, k in cases:
        m = Extended(20, 8, **kw)
        assert type(m.reads) is reads and type(m.objective) is objective, kw
        assert m.marginal_k == k and m.inference == m.reads.name
    m = Extended(20, 8, baseline_kind="expected")
    assert m.objective.baseline == "expected" and type(m.objective) is Reinforce
    with pytest.raises(TypeError):  # options after `dropout` are keywords only
        Extended(20, 8, 10, 12, 9, 0.0, 0.0)


def test_set_reads_validates_and_keeps_the_k():
    """`set_reads` by name or object; an unknown name is one line; 'marginal' by
    name keeps the constructor's K."""
    m, feats, caps, lengths = small_model(inference="marginal", marginal_k=2)
    m.eval()
    for reads in ("argmax", "expected", "sample", ExpectedReads()):
        m.set_reads(reads)
        assert m.inference == (reads if isinstance(reads, str) else reads.name)
    m.set_reads("marginal")
    assert m.marginal_k == 2
    with torch.no_grad():
        k2 = m(feats, caps, lengths)[0]
        m.set_reads(MarginalReads(2))
        assert torch.equal(m(feats, caps, lengths)[0], k2)
        m.set_reads(MarginalReads())
        assert not torch.equal(m(feats, caps, lengths)[0], k2)
    for bad in ("bogus", "Marginal", 3):
        with pytest.raises(ValueError) as err:
            m.set_reads(bad)
        assert "inference (reads) must be one of" in str(err.value)
        assert "\n" not in str(err.value)
    paper = HardAttentionCaptioner(20, 8)
    paper.set_reads("expected")
    assert paper.inference == "expected"
    with pytest.raises(ValueError, match="must be one of"):
        paper.set_reads("marginal")  # not the paper's


def test_marginal_decoding_keeps_the_protocols_static_state():
    """Every mode keeps a and the keys (with the marginal's tables) at (2, 3): per
    image, never expanded to beams."""
    from sat_tutorial.decoding import beam_search

    m, feats, caps, lengths = small_model(inference="marginal")
    m.eval()
    assert Extended.static_state == m.static_state == (2, 3)
    state = m.init_state(feats)
    assert all(state[i].shape[0] == len(feats) for i in m.static_state)
    one = [
        beam_search(m, feats[i : i + 1], beam_size=3, max_len=6)[0] for i in range(4)
    ]
    for a, b in zip(beam_search(m, feats, beam_size=3, max_len=6), one):
        assert a.tokens == b.tokens


def test_marginal_objective_needs_no_flag():
    """The marginal objective's loss is −Σ M(y)/#words as eval mode scores it, with
    no mode switched on the model."""
    m, feats, caps, lengths = small_model(objective="marginal", marginal_k=3)
    m.eval()
    with torch.no_grad():
        M = -caption_nll(m(feats, caps, lengths)[0], caps, lengths)
    m.train()
    loss, _ = m.loss(feats, caps, lengths)
    torch.testing.assert_close(loss.detach(), -M.sum() / (lengths - 1).sum())
    assert type(m.reads) is MarginalReads and int(m.train_steps) == 1


def test_old_checkpoint_options_load():
    """A checkpoint's flat options (as the CLI writes them) build the model and its
    weights."""
    kw = dict(alpha_c=0.0, lambda_r=0.1, expected_warmup=300, credit="reward_to_go")
    m = Extended(20, 8, 10, 12, 9, 0.0, **kw)
    m2 = Extended(20, 8, 10, 12, 9, 0.0, **kw)
    m2.load_state_dict(m.state_dict())
    assert type(m2.objective) is RewardToGo and m2.expected_warmup == 300


# --- the objective owns its settings; presets name objects (issue 60, item 5) --------


def test_the_objective_owns_the_sampled_rules_settings():
    """`model.lambda_r` and the rest are the objective's: set on either, seen on both;
    a new objective brings its own; a setting on a marginal-trained model is refused."""
    m = Extended(
        20, 8, objective={"name": "reward_to_go", "lambda_r": 0.1}, p_expected=0.2
    )
    assert type(m.objective) is RewardToGo
    assert (m.lambda_r, m.p_expected, m.objective.p_expected) == (0.1, 0.2, 0.2)
    m.baseline_decay = 0.5
    assert m.objective.baseline_decay == 0.5
    m.objective = Reinforce(lambda_r=2.0, expected_warmup=3)
    assert (m.lambda_r, m.baseline_decay, m.expected_warmup) == (2.0, 0.9, 3)
    assert m.warming_up()  # the model's counter, the objective's length
    assert repr(m.objective) == (
        "Reinforce(baseline='moving_average', lambda_r=2.0, expected_warmup=3)"
    )
    spec = {"name": "reward_to_go", "lambda_r": 0.1, "expected_warmup": 300}
    paper = Extended(
        20, 8, objective=spec, lambda_r=1.0, expected_warmup=0, credit="caption"
    )
    assert type(paper.objective) is Reinforce  # options given go over the spec's,
    assert (paper.lambda_r, paper.expected_warmup) == (1.0, 0)  # defaults too
    assert repr(Extended(20, 8, objective="reinforce").objective) == (
        "Reinforce(baseline='moving_average')"
    )
    marginal = Extended(20, 8, objective="marginal")
    with pytest.raises(
        ValueError, match="lambda_r=0.5 applies to objective='reinforce'"
    ):
        marginal.lambda_r = 0.5
    with pytest.raises(ValueError, match="has no setting 'lamda_r'"):
        Reinforce(lamda_r=0.1)


def _train(argv, capsys):
    from sat_tutorial.cli import main

    capsys.readouterr()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err


def test_model_kwargs_choose_the_hard_objective_over_the_preset(tmp_path, capsys):
    """`--model hard --model-kwargs '{"objective": "marginal"}'` trains by the marginal
    (the preset's REINFORCE settings go with its objective); a flat option completes
    the preset's objective; one that does not apply is one line, exit 1."""
    from test_hostile import tiny_flags

    def train(kwargs, out):
        argv = ["train", "--model", "hard", "--model-kwargs", kwargs, "--out", out]
        return _train([*argv, *tiny_flags(steps=2)], capsys)

    code, err = train('{"objective": "marginal"}', tmp_path / "marginal")
    assert code == 0, err
    run = load_checkpoint(tmp_path / "marginal" / "last.pt")
    assert run["config"]["model_kwargs"] == {"alpha_c": 0.0, "objective": "marginal"}
    from sat_tutorial.api import load_captioner

    model = load_captioner(tmp_path / "marginal" / "last.pt", device="cpu").model
    assert type(model.objective) is Marginal and model.inference == "marginal"
    code, err = train('{"lambda_r": 0.5}', tmp_path / "flat")
    assert code == 0, err
    model = load_captioner(tmp_path / "flat" / "last.pt", device="cpu").model
    assert type(model.objective) is RewardToGo
    assert (model.lambda_r, model.expected_warmup) == (0.5, 300)
    code, err = train('{"objective": "marginal", "lambda_r": 0.5}', tmp_path / "bad")
    lines = [x for x in err.splitlines() if x.strip() and "%|" not in x]
    assert code == 1 and "Traceback" not in err, err
    assert "lambda_r=0.5 applies to objective='reinforce'" in lines[-1], err
