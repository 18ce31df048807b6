import torch

from sat_tutorial.decoding import beam_search, expand_state, greedy, select_state
from sat_tutorial.soft_attention import SoftAttentionCaptioner


def model(seed=0):
    torch.manual_seed(seed)
    m = SoftAttentionCaptioner(25, 8, embed_dim=8, hidden_dim=12, attention_dim=8, dropout=0.0).eval()
    with torch.no_grad(): m.L_o.bias[2] -= 2.0
    return m


def test_state_helpers():
    s = (torch.arange(3)[:, None].float(), torch.arange(6).reshape(3, 2))
    e = expand_state(s, 2)
    assert e[0].flatten().tolist() == [0, 0, 1, 1, 2, 2]
    assert select_state(e, torch.tensor([5, 0]))[1].tolist() == [[4, 5], [0, 1]]


def test_beam1_is_greedy_and_batch_is_per_image():
    m, f = model(), torch.randn(5, 7, 8)
    g, b1 = greedy(m, f, 10), beam_search(m, f, 1, 10)
    assert [c.tokens for c in g] == [c.tokens for c in b1]
    b4 = beam_search(m, f, 4, 10)
    assert [c.tokens for c in b4] == [beam_search(m, f[i:i + 1], 4, 10)[0].tokens for i in range(5)]


def test_score_is_sum_of_token_logprobs():
    m, f = model(1), torch.randn(4, 7, 8)
    for x, c in zip(f, beam_search(m, f, 3, 10)):
        ids = torch.tensor([[1] + c.tokens + ([2] if c.finished else [])])
        with torch.no_grad(): lp = m(x[None], ids, torch.tensor([ids.shape[1]]))[0].log_softmax(-1)[0]
        assert abs(float(lp.gather(1, ids[0, 1:, None]).sum()) - c.logprob) < 1e-4
        assert c.attn.shape == (len(c.tokens), 7)


def test_max_len_respected():
    m = model(2)
    with torch.no_grad(): m.L_o.bias[2] -= 50.0          # never ends
    for c in beam_search(m, torch.randn(3, 7, 8), 3, 6) + greedy(m, torch.randn(3, 7, 8), 6):
        assert len(c.tokens) == 6 and not c.finished
