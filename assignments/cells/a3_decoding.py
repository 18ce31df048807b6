# %% md
# # A3 — Beam search for any captioner
#
# Follows notebook `08_decoding`. Every captioner of the package follows one protocol:
# `model.init_state(feats)` computes what is needed once per image, and
# `model.step(words, state)` returns the log-probabilities of the next word `(N, V)`,
# the new state and the attention `(N, L)`. Decoding uses nothing else, so one beam
# search serves every model. You write it, batched over images. The grader's checks
# compare it with **brute-force enumeration** of every caption on a tiny vocabulary,
# with `sat_tutorial.decoding.greedy` (beam size 1) and with
# `sat_tutorial.decoding.beam_search`, on two different captioners.
#
# Conventions: word ids `<pad>` = 0, `<start>` = 1, `<end>` = 2. A caption ends when it
# emits `<end>`; its score is $\sum_t \log p(y_t \mid y_{<t}, a)$ over the words it
# emitted, `<end>` included. A caption still running after `max_len` words is kept as it
# is. The best caption of an image is the beam with the highest score (no length
# normalisation). Any word id may be emitted (do not forbid any).
#
# **What you may use.** torch, `model.init_state`, `model.step`, `model.static_state`
# and the given `select_state`. Write each answer yourself: copying code from the
# package (its source, its notebooks) or from anyone else into an answer is not allowed,
# whether pasted or read and executed while the notebook runs. While your notebook is
# graded, the package's implementations of what the parts ask for are not there: those
# functions raise `NotImplementedError` (`decoding.beam_search`, `greedy`, `decode` and
# `expand_state`); a part that relies on them scores 0. The grader runs your functions
# on its own inputs in a separate process and compares the results with the solution's;
# the tests below only help you.
#
# Write your code between `# YOUR CODE HERE` / `raise NotImplementedError()` (delete
# both). 10 points.

# %%
import itertools
import torch
from sat_tutorial.core import seed_everything
from sat_tutorial.butd_beyond import BUTDCaptioner
from sat_tutorial.decoding import select_state
from sat_tutorial.soft_attention import SoftAttentionCaptioner

torch.set_num_threads(1)
PAD, START, END = 0, 1, 2


def tiny_captioner(kind, V=7, D=4, seed=0):
    """A small random captioner whose word distributions are far from uniform, in eval
    mode."""
    seed_everything(seed)
    cls = SoftAttentionCaptioner if kind == "soft" else BUTDCaptioner
    model = cls(V, D, embed_dim=5, hidden_dim=6, attention_dim=5, dropout=0.0).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(2.0)
    return model


model = tiny_captioner("soft")
feats = torch.randn(3, 5, 4)  # B = 3 images, L = 5 locations, D = 4
print("per-image constants in the state (static_state):", model.static_state)

# %% md
# ## 1. One row per beam (2 points)
#
# Beam search runs `k` hypotheses per image as `N = B·k` rows of one batch.
# `expand_state(state, k, static)` turns each tensor of the state `(B, …)` into `(B·k,
# …)` with **the k beams of an image next to each other** (rows `b·k … b·k + k − 1`
# belong to image `b`), except the tensors at the positions listed in `static` (the
# model's `static_state`: annotations, projected keys), which are per-image constants
# and stay `(B, …)`: every beam of an image shares them. `select_state(state, rows,
# static)` (given) later keeps the chosen rows.


# %% solution id=a3_expand
def expand_state(state, k, static=()):
    """Each state tensor `(B, …)` → `(B·k, …)`, an image's k beams adjacent; tensors at
    `static` positions unchanged."""
    ### BEGIN SOLUTION
    return tuple(
        s if i in static else s.repeat_interleave(k, 0) for i, s in enumerate(state)
    )
    ### END SOLUTION


# %% test id=a3_expand_test points=2
st = expand_state((torch.zeros(2, 3), torch.ones(2, 4, 5)), 3, static=(1,))
assert st[0].shape == (6, 3) and st[1].shape == (2, 4, 5), (
    "per-row tensors grow to (B·k, …); static ones stay (B, …)"
)
rows = expand_state((torch.arange(3)[:, None],), 2)
assert rows[0][:, 0].tolist() == [0, 0, 1, 1, 2, 2], (
    "the k beams of an image must be adjacent (rows 0, 0, 1, 1, 2, 2, not 0, 1, 2, "
    f"0, 1, 2): got rows of images {rows[0][:, 0].tolist()} (repeat_interleave)"
)


# %% check id=a3_expand_test
def calls():
    from sat_tutorial.soft_attention import SoftAttentionCaptioner

    seed_everything(30)
    model = SoftAttentionCaptioner(7, 4, embed_dim=5, hidden_dim=6, attention_dim=5)
    with torch.no_grad():
        state = model.init_state(torch.randn(3, 5, 4))
    rows = torch.randperm(100)[:3]  # three images' own numbers
    return [
        ("expand_state", ((rows[:, None], rows), 2), {}),
        ("expand_state", (state, 4, model.static_state), {}),
    ]


def outputs(results):
    return {"rows": list(results[0]), "the expanded state": list(results[1])}


# %% md
# ## 2. Beam search (8 points)
#
# Keep, for every image, the `beam_size` best partial captions. At each step, extend
# every live beam by every word, score the extensions, and keep the best `beam_size` of
# the `beam_size × V` candidates of each image. Some things to get right:
#
# - at the first step all beams of an image are the same (just `<start>`): do not let
#   the same caption fill every beam;
# - a beam that has emitted `<end>` is finished: its score must not change any more, but
#   it stays in the competition (one way: let it only "emit" `<pad>` at cost 0);
# - the state rows must follow their beams (`select_state`), and the per-image constants
#   stay shared.
#
# Return a list with one `(tokens, score)` per image: `tokens` a list of word ids
# without `<start>`, cut before the first `<end>`; `score` a float, the summed
# log-probability (with `<end>` if reached). Call `model.eval()` and decode without
# gradients.


# %% solution id=a3_beam
def beam_search(model, feats, beam_size=3, max_len=20):
    """Batched beam search with any captioner: `[(tokens, score)]`, the best caption of
    each image of `feats (B, L, D)`."""
    ### BEGIN SOLUTION
    model.eval()
    B, K = feats.shape[0], beam_size
    static = getattr(model, "static_state", ())
    with torch.no_grad():
        state = expand_state(model.init_state(feats), K, static)
        scores = torch.zeros(B, K)
        scores[:, 1:] = float("-inf")  # only beam 0 is alive at first
        words = torch.full((B * K,), START, dtype=torch.long)
        finished = torch.zeros(B * K, dtype=torch.bool)
        history = torch.zeros(B * K, 0, dtype=torch.long)
        for _ in range(max_len):
            lp, state, _ = model.step(words, state)  # (B·K, V)
            lp = lp.float().clone()
            V = lp.shape[1]
            lp[finished] = float("-inf")
            lp[finished, PAD] = 0.0  # a finished caption only grows <pad>, for free
            cand = (scores.reshape(-1, 1) + lp).reshape(B, K * V)  # (B, K·V)
            scores, idx = cand.topk(K, dim=1)  # (B, K)
            src = (torch.arange(B)[:, None] * K + idx // V).reshape(
                -1
            )  # the row each new beam comes from
            words = (idx % V).reshape(-1)
            state = select_state(state, src, static)
            history = torch.cat([history[src], words[:, None]], 1)
            finished = finished[src] | (words == END)
            if finished.all():
                break
        out = []
        for b in range(B):
            k = int(scores[b].argmax())
            toks = history[b * K + k].tolist()
            out.append(
                (toks[: toks.index(END)] if END in toks else toks, float(scores[b, k]))
            )
    return out
    ### END SOLUTION


# %% test id=a3_greedy_test points=2
caps = beam_search(model, feats, beam_size=1, max_len=8)
assert len(caps) == 3 and all(isinstance(t, list) for t, _ in caps), (
    "one (tokens, score) per image"
)


def greedy_by_hand(model, feats, max_len):
    "Greedy decoding written out: the most likely word at every step."
    n = feats.shape[0]
    toks, score = [[] for _ in range(n)], torch.zeros(n)
    done = torch.zeros(n, dtype=torch.bool)
    with torch.no_grad():
        state, words = model.init_state(feats), torch.full((n,), START)
        for _ in range(max_len):
            lp, state, _ = model.step(words, state)
            words = lp.argmax(-1)
            score += torch.where(done, 0.0, lp.gather(1, words[:, None]).squeeze(1))
            for b in range(n):
                if not done[b] and words[b] != END:
                    toks[b].append(int(words[b]))
            done |= words == END
    return list(zip(toks, score.tolist()))


for b, ((toks, score), (g_toks, g_score)) in enumerate(
    zip(caps, greedy_by_hand(model, feats, 8))
):
    assert toks == g_toks, (
        f"image {b}: beam size 1 must be greedy decoding: {toks} against {g_toks} "
        "(tokens without <start>, cut before <end>)"
    )
    assert abs(score - g_score) < 1e-4, (
        f"image {b}: beam size 1 scores {score:.4f}, greedy {g_score:.4f} (sum the "
        "log-probabilities of the words emitted, <end> included, nothing after it)"
    )

ending = tiny_captioner("soft", seed=4)
with torch.no_grad():
    ending.L_o.bias[END] += 6.0  # <end> likely: half the captions stop after a word
end_feats = torch.randn(8, 5, 4) * 2
for b, ((toks, score), (g_toks, g_score)) in enumerate(
    zip(
        beam_search(ending, end_feats, beam_size=1, max_len=8),
        greedy_by_hand(ending, end_feats, 8),
    )
):
    assert toks == g_toks and abs(score - g_score) < 1e-4, (
        f"image {b} with <end> likely: beam size 1 gives {toks} ({score:.4f}), greedy "
        f"{g_toks} ({g_score:.4f}): a caption that has emitted <end> is finished (no "
        "more words, no more score)"
    )


# %% check id=a3_greedy_test
def captioner(kind, seed, end_bias=0.0):
    """A small random captioner (far from uniform; `end_bias` makes <end> likelier), in
    eval mode, and the step that builds the same one in the sandbox."""
    from sat_tutorial.butd_beyond import BUTDCaptioner
    from sat_tutorial.soft_attention import SoftAttentionCaptioner

    seed_everything(seed)
    cls = SoftAttentionCaptioner if kind == "soft" else BUTDCaptioner
    config = {"embed_dim": 5, "hidden_dim": 6, "attention_dim": 5, "dropout": 0.0}
    model = cls(7, 4, **config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(2.0)
        out = model.L_o if kind == "soft" else model.W_p
        out.bias[2] += end_bias
    return model, build(cls, (7, 4), config, model.state_dict(), eval=True)


def captions(result):
    "[[tokens, score]] from what beam_search returned."
    return [[list(t), float(s)] for t, s in result]


KINDS = ("soft", "butd")
WANT = {}  # what sat_tutorial.decoding.greedy finds (on the grader's side)


def calls():
    from sat_tutorial.decoding import greedy

    steps = []
    for kind in KINDS:
        m, made = captioner(kind, seed=31, end_bias=2.0)  # some captions end early
        f = torch.randn(24, 5, 4) * 2
        WANT[kind] = [[list(g.tokens), float(g.logprob)] for g in greedy(m, f, 8)]
        steps += [made, call("beam_search", ref(len(steps)), f, beam_size=1, max_len=8)]
    return steps


def outputs(results):
    return {kind: captions(results[2 * k + 1]) for k, kind in enumerate(KINDS)}


def compare(got, want):
    for kind, caps in WANT.items():
        for b, (toks, score) in enumerate(caps):
            mine = got[kind][b]
            if mine[0] != toks:
                raise Mismatch(
                    f"{kind}, image {b}: beam size 1 must be greedy decoding: "
                    f"{shown(mine[0])}, greedy finds {toks}"
                )
            if abs(mine[1] - score) > 1e-4:
                raise Mismatch(
                    f"{kind}, image {b}: beam size 1 scores {mine[1]:.4f}, greedy "
                    f"{score:.4f}"
                )


# %% test id=a3_brute_force_test points=3
def brute_force(model, feats1, max_len):
    """The best caption of one image `(1, L, D)` by scoring every word sequence of
    `max_len` steps: (tokens, score)."""
    V = model.step(torch.full((1,), START), model.init_state(feats1))[0].shape[1]
    seqs = torch.tensor(
        list(itertools.product(range(V), repeat=max_len))
    )  # (V^max_len, max_len)
    n = len(seqs)
    with torch.no_grad():
        state = tuple(
            s if i in model.static_state else s.repeat_interleave(n, 0)
            for i, s in enumerate(model.init_state(feats1))
        )
        words, total, done = (
            torch.full((n,), START),
            torch.zeros(n),
            torch.zeros(n, dtype=torch.bool),
        )
        for t in range(max_len):
            lp, state, _ = model.step(words, state)
            total += torch.where(done, 0.0, lp.gather(1, seqs[:, t : t + 1]).squeeze(1))
            done |= seqs[:, t] == END
            words = seqs[:, t]
    best = int(total.argmax())
    toks = seqs[best].tolist()
    return (toks[: toks.index(END)] if END in toks else toks), float(total[best])


toks, score = brute_force(model, feats[:1], 3)
print("best caption of image 0 by enumeration:", toks, round(score, 4))
for m, f in (
    (model, feats),
    (tiny_captioner("soft", seed=5), torch.randn(3, 5, 4) * 2),
):
    found = beam_search(m, f, beam_size=49, max_len=3)
    for b in range(3):
        toks, score = brute_force(m, f[b : b + 1], 3)
        assert found[b][0] == toks and abs(found[b][1] - score) < 1e-4, (
            f"image {b}: with 49 = V² beams nothing is pruned, so beam search must "
            f"find {toks} (log p {score:.4f}); found {found[b][0]} "
            f"({found[b][1]:.4f}). "
            "Do all beams start alive (only one should)? Do finished captions keep "
            "their score?"
        )


# %% check id=a3_brute_force_test
def captioner(kind, seed, end_bias=0.0):
    """A small random captioner (far from uniform; `end_bias` makes <end> likelier), in
    eval mode, and the step that builds the same one in the sandbox."""
    from sat_tutorial.butd_beyond import BUTDCaptioner
    from sat_tutorial.soft_attention import SoftAttentionCaptioner

    seed_everything(seed)
    cls = SoftAttentionCaptioner if kind == "soft" else BUTDCaptioner
    config = {"embed_dim": 5, "hidden_dim": 6, "attention_dim": 5, "dropout": 0.0}
    model = cls(7, 4, **config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(2.0)
        out = model.L_o if kind == "soft" else model.W_p
        out.bias[2] += end_bias
    return model, build(cls, (7, 4), config, model.state_dict(), eval=True)


def captions(result):
    "[[tokens, score]] from what beam_search returned."
    return [[list(t), float(s)] for t, s in result]


MODELS = (("soft", 32), ("butd", 33))
WANT = {}  # the best caption of each image, by enumeration (on the grader's side)


def best_by_enumeration(model, feats1, max_len=3):
    """The best caption of one image `(1, L, D)` among every word sequence of `max_len`
    steps (a caption ends at its first <end>): [tokens, score]."""
    import itertools

    V = model.step(torch.ones(1, dtype=torch.long), model.init_state(feats1))[0].shape[
        1
    ]
    seqs = torch.tensor(list(itertools.product(range(V), repeat=max_len)))
    n = len(seqs)
    with torch.no_grad():
        state = tuple(
            s if i in model.static_state else s.repeat_interleave(n, 0)
            for i, s in enumerate(model.init_state(feats1))
        )
        words = torch.ones(n, dtype=torch.long)  # <start>
        total, done = torch.zeros(n), torch.zeros(n, dtype=torch.bool)
        for t in range(max_len):
            lp, state, _ = model.step(words, state)
            total += torch.where(done, 0.0, lp.gather(1, seqs[:, t : t + 1]).squeeze(1))
            done |= seqs[:, t] == 2  # <end>
            words = seqs[:, t]
    best = int(total.argmax())
    toks = seqs[best].tolist()
    return [toks[: toks.index(2)] if 2 in toks else toks, float(total[best])]


def calls():
    steps = []
    for kind, seed in MODELS:
        m, made = captioner(kind, seed)
        f = torch.randn(8, 5, 4) * 2
        WANT[kind] = [best_by_enumeration(m, f[b : b + 1]) for b in range(8)]
        steps += [
            made,
            call("beam_search", ref(len(steps)), f, beam_size=49, max_len=3),
        ]
    return steps


def outputs(results):
    return {kind: captions(results[2 * k + 1]) for k, (kind, _) in enumerate(MODELS)}


def compare(got, want):
    for kind, caps in WANT.items():
        for b, (toks, score) in enumerate(caps):
            mine = got[kind][b]
            if mine[0] != toks:
                raise Mismatch(
                    f"{kind}, image {b}: with every prefix kept, beam search must find "
                    f"the best caption {toks}, found {shown(mine[0])}"
                )
            if abs(mine[1] - score) > 1e-4:
                raise Mismatch(
                    f"{kind}, image {b}: score {mine[1]:.4f}, the caption's "
                    f"log-probability is {score:.4f}"
                )


# %% test id=a3_package_test points=3
mine = beam_search(model, feats, beam_size=3, max_len=8)
alone = [
    beam_search(model, feats[b : b + 1], beam_size=3, max_len=8)[0] for b in range(3)
]
for b in range(3):
    assert mine[b][0] == alone[b][0] and abs(mine[b][1] - alone[b][1]) < 1e-4, (
        f"image {b} decoded in a batch of 3 gives {mine[b]}, alone {alone[b]}: the "
        "images of a batch must not mix (state rows, per-image top-k)"
    )


def rescore(model, feats1, toks, max_len):
    """log p of the caption `toks` of one image `(1, L, D)`, word by word from <start>
    (with <end> when it ended before max_len)."""
    total, words = 0.0, [START] + toks
    targets = toks + ([END] if len(toks) < max_len else [])
    with torch.no_grad():
        state = model.init_state(feats1)
        for prev, nxt in zip(words, targets):
            lp, state, _ = model.step(torch.tensor([prev]), state)
            total += float(lp[0, nxt])
    return total


ending = tiny_captioner("soft", seed=4)  # as in the greedy test: <end> likely
with torch.no_grad():
    ending.L_o.bias[END] += 6.0
end_feats = torch.randn(8, 5, 4) * 2
for m, f, what in ((model, feats, ""), (ending, end_feats, " with <end> likely")):
    for b, (toks, score) in enumerate(beam_search(m, f, beam_size=3, max_len=8)):
        again = rescore(m, f[b : b + 1], toks, 8)
        assert abs(score - again) < 1e-4, (
            f"image {b}{what}: you return {toks} with score {score:.4f}, but that "
            f"caption's log-probability is {again:.4f}: the score, the tokens, the "
            "finished flags and the state rows must all follow their beam"
        )


# %% check id=a3_package_test
def captioner(kind, seed, end_bias=0.0):
    """A small random captioner (far from uniform; `end_bias` makes <end> likelier), in
    eval mode, and the step that builds the same one in the sandbox."""
    from sat_tutorial.butd_beyond import BUTDCaptioner
    from sat_tutorial.soft_attention import SoftAttentionCaptioner

    seed_everything(seed)
    cls = SoftAttentionCaptioner if kind == "soft" else BUTDCaptioner
    config = {"embed_dim": 5, "hidden_dim": 6, "attention_dim": 5, "dropout": 0.0}
    model = cls(7, 4, **config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(2.0)
        out = model.L_o if kind == "soft" else model.W_p
        out.bias[2] += end_bias
    return model, build(cls, (7, 4), config, model.state_dict(), eval=True)


def captions(result):
    "[[tokens, score]] from what beam_search returned."
    return [[list(t), float(s)] for t, s in result]


MODELS = (  # captions of different lengths
    ("soft", 34, 0.0),
    ("butd", 30, 0.0),
    ("soft", 35, 2.0),
    ("butd", 36, 2.0),
)
WANT = {}  # what sat_tutorial.decoding.beam_search finds (on the grader's side)
ASKED = []  # the name of each call's comparison


def calls():
    from sat_tutorial.decoding import beam_search

    steps = []
    ASKED.clear()
    for kind, seed, end_bias in MODELS:
        m, made = captioner(kind, seed, end_bias)
        f = torch.randn(16, 5, 4) * 2
        steps.append(made)
        at = len(steps) - 1
        for k in (2, 3):
            early = " (<end> likelier)" if end_bias else ""
            what = f"{kind}{early}, beam {k}"
            WANT[what] = [
                [list(c.tokens), float(c.logprob)]
                for c in beam_search(m, f, beam_size=k, max_len=8)
            ]
            steps.append(call("beam_search", ref(at), f, k, 8))
            ASKED.append((what, len(steps) - 1))
    return steps


def outputs(results):
    return {what: captions(results[i]) for what, i in ASKED}


def compare(got, want):
    for what, caps in WANT.items():
        for b, (toks, score) in enumerate(caps):
            mine = got[what][b]
            if mine[0] != toks:
                raise Mismatch(
                    f"{what}, image {b} of a batch of 16: {shown(mine[0])}, the package "
                    f"finds {toks}"
                )
            if abs(mine[1] - score) > 1e-4:
                raise Mismatch(
                    f"{what}, image {b}: score {mine[1]:.4f}, not {score:.4f}"
                )


# %% forbid
# sat_tutorial.decoding:beam_search
# sat_tutorial.decoding:_best_beams
# sat_tutorial.decoding:greedy
# sat_tutorial.decoding:decode
# sat_tutorial.decoding:expand_state
