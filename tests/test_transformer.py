"""The Transformer captioner (notebook 15) beyond the protocol tests of
test_captioners.py: the cache against recomputing the prefix, its options and their
errors, and the command line end to end (train, evaluate, self-critical training)."""

import json

import pytest
import torch

from sat_tutorial.cli import main
from sat_tutorial.decoding import beam_search, greedy
from sat_tutorial.core import InputError
from sat_tutorial.transformer import TransformerCaptioner, grid_encoding
from sat_tutorial.transformer_beyond import PrefixRecompute


def small(**kw):
    torch.manual_seed(0)
    m = TransformerCaptioner(
        30,
        12,
        **{
            **dict(
                embed_dim=16,
                hidden_dim=8,
                attention_dim=16,
                heads=4,
                layers=2,
                dropout=0.0,
            ),
            **kw,
        },
    )
    m.out = torch.nn.Linear(
        16, 30
    )  # untied: with E as its output matrix a random model repeats its input word
    return m.eval()


@pytest.mark.parametrize("position", ["sinusoidal", "learned", "none"])
def test_cache_equals_recomputing_the_prefix(position):
    m, feats = small(position=position), torch.randn(4, 16, 12)  # a 4×4 grid
    for search in (
        lambda d: greedy(d, feats, 9),
        lambda d: beam_search(d, feats, 3, 9),
    ):
        a, b = search(m), search(PrefixRecompute(m))
        assert [c.tokens for c in a] == [c.tokens for c in b]
        for x, y in zip(a, b):
            assert abs(x.logprob - y.logprob) < 1e-4 and torch.allclose(
                x.attn, y.attn, atol=1e-5
            )


def test_grid_position_is_used_only_for_square_grids():
    m = small()
    sq, regions = (
        torch.randn(2, 9, 12),
        torch.randn(2, 10, 12),
    )  # 3×3 grid; 10 regions: a set, no grid
    x = m.W_a(sq) + grid_encoding(3, 3, 16)
    assert torch.allclose(m.encode(sq), m.enc_norm(m.encoder[0](x)), atol=1e-6)
    assert torch.allclose(
        m.encode(regions), m.enc_norm(m.encoder[0](m.W_a(regions))), atol=1e-6
    )


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(position="polar"), "position must be"),
        (dict(heads=3), "multiples of heads"),
        (
            dict(embed_dim=18, attention_dim=16, heads=2),
            None,
        ),  # fine: d_model 18, d_qk 16, 2 heads
    ],
)
def test_options_and_their_errors(kw, match):
    if match is None:
        small(**kw)
        return
    with pytest.raises(ValueError, match=match):
        small(**kw)


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(layers=0), "transformer: layers must be an integer ≥ 1, not 0"),
        (dict(heads=0), "transformer: heads must be an integer ≥ 1, not 0"),
        (dict(encoder_layers=-1), "encoder_layers must be an integer ≥ 0, not -1"),
        (dict(max_len=1), "max_len must be an integer ≥ 2, not 1"),
        (dict(layers=2.5), "layers must be an integer ≥ 1, not 2.5"),
        (
            dict(heads=3),
            "embed_dim 16 and attention_dim 16 must be multiples of heads 3",
        ),
        (dict(embed_dim=18, heads=1, attention_dim=18, position="none"), None),
        (dict(embed_dim=9, heads=1, attention_dim=9), "embed_dim even"),
        (dict(position="polar"), "position must be sinusoidal, learned or none"),
    ],
)
def test_the_constructor_refuses_what_it_cannot_build(kw, match):
    """One line naming the option, at construction (`--model-kwargs` reaches it through
    `fit.prepare`, before the first step)."""
    if match is None:
        small(**kw)
        return
    with pytest.raises(InputError, match=match) as e:
        small(**kw)
    assert "\n" not in str(e.value)


def test_check_max_len_asks_for_start_and_the_words():
    "Captions of n words need n + 1 word positions: <start> and the words."
    m = small(max_len=21)
    m.check_max_len(20)
    with pytest.raises(InputError, match="max_len 21 holds <start> and 20 words"):
        m.check_max_len(21)
    with pytest.raises(InputError, match="need max_len 41 or more"):
        m.check_max_len(40)


def test_captions_longer_than_max_len_are_refused():
    m = small(max_len=4)
    caps = torch.randint(3, 30, (2, 6))
    caps[:, 0] = 1
    with pytest.raises(ValueError, match="max_len 4"):
        m(torch.randn(2, 9, 12), caps, torch.tensor([6, 6]))


def test_grid_encoding_needs_a_multiple_of_four():
    with pytest.raises(ValueError, match="multiple of 4"):
        grid_encoding(3, 3, 6)


def test_train_evaluate_and_self_critical_through_main(tmp_path, capsys):
    """`train --model transformer` on the scenes, `evaluate` its checkpoint, and
    self-critical training from it."""
    common = [
        "--data",
        "scenes",
        "--n-train",
        "64",
        "--n-val",
        "8",
        "--n-test",
        "8",
        "--val-every",
        "4",
        "--device",
        "cpu",
    ]
    assert (
        main(
            [
                "train",
                "--model",
                "transformer",
                "--steps",
                "4",
                "--out",
                str(tmp_path / "xe"),
                *common,
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "evaluate",
                "--checkpoint",
                str(tmp_path / "xe" / "best.pt"),
                "--split",
                "test",
                "--limit",
                "4",
                "--json",
                str(tmp_path / "e.json"),
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "e.json").read_text())["metrics"]["n_images"] == 4
    assert (
        main(
            [
                "train",
                "--model",
                "transformer",
                "--steps",
                "2",
                "--scst",
                "--init-from",
                str(tmp_path / "xe" / "best.pt"),
                "--out",
                str(tmp_path / "scst"),
                *common,
            ]
        )
        == 0
    )
    ck = torch.load(tmp_path / "scst" / "last.pt", weights_only=True)
    assert (
        ck["config"]["model"] == "transformer"
        and ck["config"]["model_kwargs"]["heads"] == 4
        and ck["config"]["model_kwargs"]["encoder_layers"] == 0
    )


@pytest.mark.parametrize(
    "model_kwargs,message",
    [
        (
            '{"max_len": 21}',
            "transformer: max_len 21 holds <start> and 20 words, but captions of up "
            "to 40 words (--max-len) need max_len 41 or more",
        ),
        ('{"layers": 0}', "transformer: layers must be an integer ≥ 1, not 0"),
    ],
    ids=["max_len", "layers"],
)
def test_a_configuration_error_stops_train_before_step_one(
    tmp_path, capsys, model_kwargs, message
):
    """`train --model transformer` with a model it cannot build (or one too short for
    --max-len) fails in one line before its first step, and with --overwrite the
    earlier run in --out is left as it was (nothing is deleted before the new run's
    first checkpoint)."""
    out = tmp_path / "run"
    out.mkdir()
    earlier = {"last.pt": b"earlier last", "best.pt": b"earlier best"}
    earlier["train_summary.json"] = b'{"steps": 7}'
    for name, data in earlier.items():
        (out / name).write_bytes(data)
    argv = ["train", "--model", "transformer", "--data", "scenes", "--n-train", "16"]
    argv += ["--n-val", "4", "--n-test", "0", "--steps", "4", "--ckpt-every", "1"]
    argv += ["--val-every", "2", "--max-len", "40", "--device", "cpu"]
    argv += ["--model-kwargs", model_kwargs, "--overwrite", "--out", str(out)]
    capsys.readouterr()
    assert main(argv) == 1
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert err == [f"sat-tutorial: error: {message}"], captured.err
    assert "step" not in captured.out  # no training step ran, no checkpoint either
    assert {p.name: p.read_bytes() for p in out.iterdir()} == earlier


def test_decoding_past_the_word_positions_is_refused_by_evaluate_and_caption(
    tmp_path, capsys
):
    """A Transformer holds max_len positions: `evaluate`, `caption` and
    `load_captioner` refuse a longer --max-len with the hook's one line, before
    decoding anything."""
    from PIL import Image
    from sat_tutorial.api import load_captioner
    from sat_tutorial.scenes import make_scenes

    run = tmp_path / "run"
    argv = ["train", "--model", "transformer", "--steps", "2", "--out", str(run)]
    small_data = [
        "--n-train",
        "32",
        "--n-val",
        "4",
        "--n-test",
        "4",
        "--val-every",
        "2",
    ]
    kwargs = ["--model-kwargs", '{"max_len": 21}']
    assert main([*argv, *small_data, *kwargs]) == 0
    image = tmp_path / "x.png"
    Image.fromarray(make_scenes(1, seed=5)[0].array).save(image)
    capsys.readouterr()
    ck = ["--checkpoint", str(run / "best.pt")]
    assert main(["evaluate", *ck, "--max-len", "40"]) == 1
    assert main(["caption", *ck, str(image), "--max-len", "40"]) == 1
    err = capsys.readouterr().err
    assert err.count("need max_len 41 or more") == 2, err
    cap = load_captioner(run / "best.pt")
    with pytest.raises(InputError, match="need max_len 41 or more"):
        cap(str(image), max_len=40)
    r = cap(str(image), max_len=20)  # within its positions: decodes
    assert len(r.words) <= 20
