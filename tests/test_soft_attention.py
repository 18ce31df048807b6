import torch
import pytest

from sat_tutorial.data import Vocab
from sat_tutorial.soft_attention import SoftAttentionCaptioner, caption_nll, doubly_stochastic_penalty, target_mask


def batch(V=15, B=3, T=6):
    torch.manual_seed(0)
    lengths = torch.tensor([T, T - 2, 3])
    caps = torch.randint(4, V, (B, T)); caps[:, 0] = Vocab.start
    for b, n in enumerate(lengths): caps[b, n - 1] = Vocab.end; caps[b, n:] = Vocab.pad
    return caps, lengths


def test_protocol_shapes_and_contract_signature():
    m = SoftAttentionCaptioner(15, 8, embed_dim=6, hidden_dim=7, attention_dim=5, dropout=0.5)
    caps, lengths = batch()
    feats = torch.randn(3, 10, 8)
    logits, attn = m(feats, caps, lengths)
    assert logits.shape == (3, 5, 15) and attn.shape == (3, 5, 10)
    state = m.init_state(feats)
    assert isinstance(state, tuple) and all(s.shape[0] == 3 for s in state)
    lp, state2, a = m.step(caps[:, 0], state)
    assert lp.shape == (3, 15) and a.shape == (3, 10) and len(state2) == len(state)
    assert torch.allclose(lp.exp().sum(-1), torch.ones(3), atol=1e-5)


def test_wrong_feature_dim_is_a_clear_error():
    m = SoftAttentionCaptioner(15, 8, embed_dim=6, hidden_dim=7, attention_dim=5)
    caps, lengths = batch()
    with pytest.raises(ValueError, match="feats: dim 2 should be 8"):
        m(torch.randn(3, 10, 9), caps, lengths)


def test_padding_changes_nothing_with_dropout_seeded():
    m = SoftAttentionCaptioner(15, 8, embed_dim=6, hidden_dim=7, attention_dim=5, dropout=0.3)
    caps, lengths = batch()
    feats = torch.randn(3, 10, 8)
    other = caps.clone(); other[caps == Vocab.pad] = 9
    grads = []
    for c in (caps, other):
        torch.manual_seed(1); m.zero_grad()
        loss, _ = m.loss(feats, c, lengths); loss.backward()
        grads.append(torch.cat([p.grad.flatten() for p in m.parameters()]))
    assert torch.equal(grads[0], grads[1])


def test_masks_and_penalty():
    caps, lengths = batch()
    mask = target_mask(caps, lengths)
    assert mask.sum(1).tolist() == (lengths - 1).tolist()
    alpha = torch.full((3, 5, 4), 0.25)
    pen = doubly_stochastic_penalty(alpha, mask)
    # sum over t of 0.25 is 0.25 * n_words per cell; penalty = 4 * (1 - 0.25 n)^2
    assert torch.allclose(pen, 4 * (1 - 0.25 * (lengths - 1).float()) ** 2)


def test_nll_ignores_padding_targets():
    caps, lengths = batch()
    logits = torch.zeros(3, 5, 15)
    # uniform distribution: NLL = n_words * log V
    assert torch.allclose(caption_nll(logits, caps, lengths), (lengths - 1).float() * torch.log(torch.tensor(15.0)))
