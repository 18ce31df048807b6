import pytest
import torch

from sat_tutorial.adaptive_attention import (
    AdaptiveAttention,
    AdaptiveAttentionCaptioner,
    grounding_probability,
    spatial_map,
)
from sat_tutorial.data import Vocab
from sat_tutorial.decoding import beam_search, greedy
from fakes import caption_batch


def small(**kw):
    torch.manual_seed(1)
    return AdaptiveAttentionCaptioner(
        15, 8, **{**dict(embed_dim=6, hidden_dim=7, attention_dim=5, dropout=0.0), **kw}
    )


def test_loss_reports_the_grounding_probability():
    "(The protocol itself is checked for every captioner in test_captioners.py.)"
    m = small(dropout=0.5)
    caps, lengths = caption_batch()
    loss, stats = m.loss(torch.randn(3, 10, 8), caps, lengths)
    assert (
        loss.ndim == 0
        and {"nll", "grounding"} <= set(stats)
        and 0 <= stats["grounding"] <= 1
    )


def test_default_sizes_match_the_protocol():
    m = AdaptiveAttentionCaptioner(20, 16)
    assert (
        m.hidden_dim == 512
        and m.embed.embedding_dim == 512
        and m.attention.W_g.out_features == 512
    )
    assert m.dropout.p == 0.5 and m.alpha_c == 0.0


def test_alpha_hat_is_a_distribution_and_attn_is_its_spatial_part():
    m = small()
    caps, lengths = caption_batch()
    feats = torch.randn(3, 10, 8)
    logits, alpha_hat = m.unroll(feats, caps, lengths)
    assert alpha_hat.shape == (3, 5, 11)
    assert (
        torch.allclose(alpha_hat.sum(-1), torch.ones(3, 5), atol=1e-6)
        and (alpha_hat > 0).all()
    )
    _, attn = m(feats, caps, lengths)
    assert torch.allclose(attn, alpha_hat[..., :10])
    beta = alpha_hat[..., 10]
    assert torch.allclose(grounding_probability(attn), 1 - beta, atol=1e-6)
    assert torch.allclose(spatial_map(attn).sum(-1), torch.ones(3, 5), atol=1e-5)


def test_c_hat_is_sentinel_or_context_at_the_extremes():
    torch.manual_seed(0)
    att = AdaptiveAttention(4, 3).double()
    V, s = (
        torch.randn(2, 5, 4, dtype=torch.float64),
        torch.randn(2, 4, dtype=torch.float64),
    )
    z = torch.randn(2, 5, dtype=torch.float64)
    ah, c, c_hat = att.combine(z, z.max(-1, keepdim=True).values + 60, V, s)
    assert torch.allclose(c_hat, s) and torch.allclose(
        ah[:, -1], torch.ones(2, dtype=torch.float64)
    )
    ah, c, c_hat = att.combine(z, z.min(-1, keepdim=True).values - 60, V, s)
    assert torch.allclose(c_hat, c) and torch.allclose(
        c, (z.softmax(-1)[..., None] * V).sum(1)
    )
    ah, c, c_hat = att.combine(z, torch.zeros(2, 1, dtype=torch.float64), V, s)
    beta = ah[:, -1:]
    assert torch.allclose(c_hat, beta * s + (1 - beta) * c)
    assert torch.allclose(c_hat, (ah[..., None] * torch.cat([V, s[:, None]], 1)).sum(1))


def test_gradient_matches_finite_differences():
    m = AdaptiveAttentionCaptioner(
        7, 3, embed_dim=4, hidden_dim=5, attention_dim=4, dropout=0.0, alpha_c=0.3
    ).double()
    f = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    c, n = torch.tensor([[1, 4, 5, 2], [1, 6, 2, 0]]), torch.tensor([4, 3])
    assert torch.autograd.gradcheck(lambda f: m.loss(f, c, n)[0], (f,))


def test_decoding_works_through_the_protocol():
    m = small()
    feats = torch.randn(2, 10, 8)
    for caps in (
        beam_search(m, feats, beam_size=3, max_len=7),
        greedy(m, feats, max_len=7),
    ):
        assert len(caps) == 2
        for c in caps:
            assert c.attn.shape == (len(c.tokens), 10)
            p = grounding_probability(c.attn)
            assert ((p > 0) & (p < 1)).all()
    # beam 1 is greedy: same tokens and log-probability
    g, b1 = greedy(m, feats, max_len=7), beam_search(m, feats, beam_size=1, max_len=7)
    for x, y in zip(g, b1):
        assert x.tokens == y.tokens and x.logprob == pytest.approx(y.logprob, abs=1e-4)


def test_fit_smoke_with_the_scenes_preset(tmp_path):
    from sat_tutorial.fit import fit
    from sat_tutorial.training import load_checkpoint_model, scenes_config

    cfg = scenes_config(
        model="adaptive",
        steps=2,
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
    )
    assert cfg.model_kwargs == {
        "alpha_c": 0.0,
        "sentinel_warmup": 300,
    }  # the preset's penalty weight is accepted by this model
    summary = fit(cfg, tmp_path, progress=False, log=lambda *a: None)
    assert summary["steps"] == 2
    enc, model, vocab, _ = load_checkpoint_model(tmp_path / "last.pt").model
    assert isinstance(model, AdaptiveAttentionCaptioner) and model.alpha_c == 0.0


def test_sentinel_opens_at_the_same_step_after_a_resume(tmp_path):
    """The warm-up counter is saved with the weights: 2 steps, stop, 2 more steps give
    the weights of 4 steps straight."""
    from sat_tutorial.checkpoints import load_checkpoint
    from sat_tutorial.fit import fit
    from sat_tutorial.training import load_checkpoint_model, scenes_config

    cfg = scenes_config(
        model="adaptive",
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
        model_kwargs={"alpha_c": 0.0, "sentinel_warmup": 3},
    )
    quiet = dict(progress=False, log=lambda *a: None)
    fit(cfg, tmp_path / "a", **quiet)
    fit(cfg, tmp_path / "b", stop_at=2, **quiet)
    _, half, _, _ = load_checkpoint_model(tmp_path / "b" / "last.pt").model
    assert int(half.train_steps) == 2 and not half.sentinel_open()
    fit(cfg, tmp_path / "b", resume=True, **quiet)
    a, b = (
        load_checkpoint(tmp_path / "a" / "last.pt"),
        load_checkpoint(tmp_path / "b" / "last.pt"),
    )
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    _, model, _, _ = load_checkpoint_model(tmp_path / "a" / "last.pt").model
    assert int(model.train_steps) == 4 and model.sentinel_open()
    # closed, the sentinel gets zero gradients, so Adam leaves its weights where they
    # started; step 4 moves them
    fit(cfg, tmp_path / "c", stop_at=3, **quiet)
    three = load_checkpoint(tmp_path / "c" / "last.pt")["model"]
    for k in ("sentinel.W_h.weight", "sentinel.W_x.weight", "attention.W_s.weight"):
        assert torch.equal(three[k], half.state_dict()[k]) and not torch.equal(
            three[k], a["model"][k]
        )
    assert not torch.equal(
        three["attention.W_v.weight"], half.state_dict()["attention.W_v.weight"]
    )
