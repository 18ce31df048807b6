import pytest
import torch

from sat_tutorial.decoding import beam_search, expand_state, greedy, select_state
from sat_tutorial.soft_attention import SoftAttentionCaptioner


def model(seed=0):
    torch.manual_seed(seed)
    m = SoftAttentionCaptioner(
        25, 8, embed_dim=8, hidden_dim=12, attention_dim=8, dropout=0.0
    ).eval()
    with torch.no_grad():
        m.L_o.bias[2] -= 2.0
    return m


def test_state_helpers():
    s = (torch.arange(3)[:, None].float(), torch.arange(6).reshape(3, 2))
    e = expand_state(s, 2)
    assert e[0].flatten().tolist() == [0, 0, 1, 1, 2, 2]
    assert select_state(e, torch.tensor([5, 0]))[1].tolist() == [[4, 5], [0, 1]]
    e = expand_state(
        s, 2, static=(1,)
    )  # a per-image constant is neither repeated nor reordered
    assert e[0].flatten().tolist() == [0, 0, 1, 1, 2, 2] and e[1] is s[1]
    assert select_state(e, torch.tensor([5, 0]), static=(1,))[1] is s[1]


def _captioners():
    "Every registered captioner (`@register`, notebook 06), small and in eval mode."
    from sat_tutorial.training import CAPTIONERS

    for cls in CAPTIONERS.values():
        torch.manual_seed(3)
        m = cls(25, 8, embed_dim=8, hidden_dim=12, attention_dim=8, dropout=0.0).eval()
        yield cls.__name__, m


class EndsAt(torch.nn.Module):
    """A captioner whose <end> gets +20·tanh(t − τ) at step t, τ = feats[:, 0, 0] per
    image: images end at steps we choose."""

    def __init__(self, m):
        super().__init__()
        self.m, self.static_state, self.rows = m, m.static_state, []

    def init_state(self, feats):
        return (
            *self.m.init_state(feats),
            feats.new_zeros(len(feats)),
            feats[:, 0, 0].clone(),
        )  # t, τ: per row

    def step(self, words, state):
        self.rows.append(len(words))
        *st, t, tau = state
        lp, st, a = self.m.step(words, tuple(st))
        lp = lp.clone()
        lp[:, 2] += 20 * torch.tanh(t - tau)
        return lp.log_softmax(-1), (*st, t + 1, tau), a


@pytest.mark.parametrize("name,m", list(_captioners()))
def test_batched_beam_equals_one_image_at_a_time(name, m):
    """Images end at different steps (most retire early, two run to max_len): tokens,
    scores and attention match per image."""
    torch.manual_seed(4)
    f = torch.randn(16, 7, 8)
    f[:, 0, 0] = torch.tensor(
        [
            1.5,
            2.5,
            2.5,
            3.5,
            3.5,
            3.5,
            4.5,
            4.5,
            5.5,
            5.5,
            6.5,
            7.5,
            8.5,
            9.5,
            30.0,
            30.0,
        ]
    )
    em = EndsAt(m)
    batched = beam_search(em, f, 4, 12)
    assert len(set(em.rows)) > 3, (
        f"the test needs images retired at different steps, got rows per step {em.rows}"
    )
    alone = [beam_search(em, f[i : i + 1], 4, 12)[0] for i in range(len(f))]
    assert len({len(c.tokens) for c in alone}) > 5 and not alone[-1].finished
    for x, y in zip(batched, alone):
        assert x.tokens == y.tokens and x.finished == y.finished
        assert abs(x.logprob - y.logprob) < 1e-4 and torch.allclose(
            x.attn, y.attn, atol=1e-5
        )


def test_beam1_is_greedy_and_batch_is_per_image():
    m, f = model(), torch.randn(5, 7, 8)
    g, b1 = greedy(m, f, 10), beam_search(m, f, 1, 10)
    assert [c.tokens for c in g] == [c.tokens for c in b1]
    b4 = beam_search(m, f, 4, 10)
    assert [c.tokens for c in b4] == [
        beam_search(m, f[i : i + 1], 4, 10)[0].tokens for i in range(5)
    ]


def test_score_is_sum_of_token_logprobs():
    m, f = model(1), torch.randn(4, 7, 8)
    for x, c in zip(f, beam_search(m, f, 3, 10)):
        ids = torch.tensor([[1] + c.tokens + ([2] if c.finished else [])])
        with torch.no_grad():
            logits, attn = m(x[None], ids, torch.tensor([ids.shape[1]]))
        lp = logits.log_softmax(-1)[0]
        assert abs(float(lp.gather(1, ids[0, 1:, None]).sum()) - c.logprob) < 1e-4
        assert c.attn.shape == (len(c.tokens), 7) and torch.allclose(
            c.attn, attn[0, : len(c.tokens)], atol=1e-5
        )


def test_max_len_respected():
    m = model(2)
    with torch.no_grad():
        m.L_o.bias[2] -= 50.0  # never ends
    for c in beam_search(m, torch.randn(3, 7, 8), 3, 6) + greedy(
        m, torch.randn(3, 7, 8), 6
    ):
        assert len(c.tokens) == 6 and not c.finished
