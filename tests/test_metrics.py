import math
import warnings

import pytest
import torch
from nltk.translate.bleu_score import corpus_bleu

from sat_tutorial import metrics
from sat_tutorial.karpathy import tokenize
from sat_tutorial.metrics import attention_correctness, box_fraction, grid_boxes, score
from sat_tutorial.scenes import make_scenes

REFS = {i: r.raw for i, r in enumerate(make_scenes(40, seed=21))}


def hyps_from(records_seed):
    return {i: r.raw[0] for i, r in enumerate(make_scenes(40, seed=records_seed))}


def test_bleu_matches_nltk_corpus_bleu():
    hyps = hyps_from(22)  # captions of other scenes: partial overlap
    keys = list(hyps)
    ours = score(REFS, hyps, meteor=False)
    for n in range(1, 5):
        ref = corpus_bleu(
            [[tokenize(x) for x in REFS[k]] for k in keys],
            [tokenize(hyps[k]) for k in keys],
            weights=tuple([1 / n] * n),
        )
        # pycocoevalcap and nltk break ties of 'closest reference length' differently;
        # scenes refs rarely tie
        assert ours[f"bleu{n}"] == pytest.approx(100 * ref, abs=0.5)
        assert 0 < ours[f"bleu{n}"] < 100


def test_keys_and_scale_and_ordering():
    good = score(REFS, {k: v[0] for k, v in REFS.items()})
    bad = score(REFS, hyps_from(23))
    assert set(good) == set(metrics.METRICS)
    assert (
        good["bleu4"] > bad["bleu4"]
        and good["cider"] > bad["cider"]
        and good["rouge_l"] > bad["rouge_l"]
    )
    assert 90 < good["bleu1"] <= 100 + 1e-6
    if metrics.java_available():
        assert good["meteor"] > bad["meteor"] > 0


def test_no_java_reports_meteor_missing(monkeypatch):
    monkeypatch.setattr(metrics, "java_available", lambda: False)
    metrics._warned_once.discard("java")
    with pytest.warns(UserWarning, match="METEOR needs Java"):
        s = score(REFS, hyps_from(22))
    assert s["meteor"] is None and s["bleu4"] > 0 and s["cider"] > 0


def test_empty_hypothesis_and_missing_refs():
    s = score(REFS, {0: "", 1: REFS[1][0]}, meteor=False)
    assert 0 <= s["rouge_l"] < 100
    with pytest.raises(ValueError, match="no references"):
        score(REFS, {999: "a red circle"})
    with pytest.raises(ValueError, match="no hypotheses"):
        score(REFS, {})


def test_spice_is_not_faked_offline():
    if metrics.spice_available():
        pytest.skip("SPICE jars present")
    with pytest.warns(UserWarning, match="SPICE"):
        s = score(REFS, hyps_from(22), meteor=False, spice=True)
    assert "spice" not in s


def test_attention_correctness_known_answers():
    cells = grid_boxes(2, 2, 10, 10)  # four 5x5 cells
    attn = torch.tensor([[1.0, 0, 0, 0], [0, 0, 0, 1.0], [0.25] * 4, [0.5, 0.5, 0, 0]])
    box = [0, 0, 5, 5]  # exactly cell 0
    ac = attention_correctness(attn, [0, 0, 0, 0], [box], cells)
    assert ac.tolist() == pytest.approx([1.0, 0.0, 0.25, 0.5])
    assert attention_correctness(attn, [-1, -1, -1, -1], [box], cells).numel() == 0
    # a box over a quarter of cell 3 and all of cell 1: attention on cell 3 counts one
    # quarter
    assert box_fraction(cells, [5, 0, 10, 7.5]).tolist() == pytest.approx(
        [0, 1, 0, 0.5]
    )
    two = attention_correctness(
        torch.tensor([[0, 0, 0, 1.0], [0, 0, 0, 1.0]]),
        [0, 1],
        [[0, 0, 5, 5], [7.5, 7.5, 10, 10]],
        cells,
    )
    assert two.tolist() == pytest.approx([0.0, 0.25])
