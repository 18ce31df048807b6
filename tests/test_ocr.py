"""Attention OCR (notebook 14): data set, blocks, decoder protocol, metrics, image
modes, CLI and bad input."""

import argparse
import json

import numpy as np
import pytest
import torch
from PIL import Image

from sat_tutorial import cli, ocr, ocr_cli, ocr_training
from sat_tutorial.decoding import beam_search, greedy

TINY = [
    "--steps",
    "3",
    "--n-train",
    "48",
    "--n-test",
    "12",
    "--channels",
    "8",
    "--feature-dim",
    "16",
    "--hidden-dim",
    "16",
    "--batch-size",
    "8",
    "--quiet",
    "--threads",
    "1",
]


def run_main(monkeypatch, argv):
    """The real `sat-tutorial` entry point, which registers `ocr` beside the other
    commands."""
    return cli.main(argv)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("ocr")
    p = argparse.ArgumentParser()
    ocr_cli.add_cli(p.add_subparsers())
    args = p.parse_args(["ocr", "train", "--out", str(out), *TINY])
    assert args.func(args) == 0
    return out / "ocr.pt"


# --- words and images
# -------------------------------------------------------------------------------------


def test_builtin_words_split_by_word(monkeypatch, tmp_path):
    monkeypatch.setenv(
        "SAT_TUTORIAL_DATA", str(tmp_path)
    )  # no Flickr8k there: the built-in list
    words = ocr.load_words()
    assert set(words) <= set(ocr.BUILTIN_WORDS) and set("".join(words)) == set(
        ocr.ALPHABET
    )
    train, test = ocr.split_words(words, 0.2, seed=3)
    assert not set(train) & set(test) and sorted(train + test) == words
    assert (train, test) == ocr.split_words(words, 0.2, seed=3)
    assert ocr.split_words(words, 0.2, seed=4) != (train, test)


def test_flickr8k_words_when_present(monkeypatch, tmp_path):
    d = tmp_path / "flickr8k"
    d.mkdir()
    sents = [
        {"tokens": ["a", "dog", "runs", "x", "Big", "snow-covered", "extraordinarily"]},
        {"tokens": ["grass", "dog"]},
    ]
    (d / "dataset_flickr8k.json").write_text(
        json.dumps({"images": [{"sentences": sents}]})
    )
    monkeypatch.setenv("SAT_TUTORIAL_DATA", str(tmp_path))
    assert ocr.load_words() == [
        "dog",
        "grass",
        "runs",
    ]  # 2–12 letters, a–z only, distinct, sorted
    (d / "dataset_flickr8k.json").write_text("{}")
    with pytest.raises(ValueError, match="dataset_flickr8k.json"):
        ocr.load_words()


def test_dataset_deterministic_and_held_out(monkeypatch, tmp_path):
    monkeypatch.setenv("SAT_TUTORIAL_DATA", str(tmp_path))
    cfg = ocr.OCRConfig(n_train=30, n_test=20, seed=1)
    train, test, test_words = ocr_training._datasets(cfg)
    again = ocr_training._datasets(cfg)
    np.testing.assert_array_equal(train.images, again[0].images)
    np.testing.assert_array_equal(test.images, again[1].images)
    assert set(test.words) <= set(test_words) and not set(train.words) & set(test_words)
    assert all(len(b) == len(w) for b, w in zip(train.boxes, train.words))


def test_bad_word_lists_and_fonts():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="empty"):
        ocr.split_words([])
    with pytest.raises(ValueError, match="empty"):
        ocr.WordImages([], 3)
    with pytest.raises(ValueError, match="zero-length"):
        ocr.WordImages(["ab", ""], 3)
    with pytest.raises(ValueError, match="zero-length"):
        ocr.render_word("", rng)
    with pytest.raises(ValueError, match="non-empty"):
        ocr.split_words(["ab", "c d"])
    with pytest.raises(ValueError, match="at least 2"):
        ocr.split_words(["ab", "ab"])
    with pytest.raises(ValueError, match="unknown font 'Nope'"):
        ocr.render_word("ab", rng, ocr.RenderConfig(fonts=("Nope",)))
    assert {"DejaVuSans", "DejaVuSerif-Bold", "DejaVuSansMono-Oblique"} <= set(
        ocr.font_files()
    )


def test_boxes_follow_rotation():
    """With a large tilt, the boxes computed by `_rotate_points` still hold the ink;
    with the tilt's sign flipped they do not."""
    cfg = ocr.RenderConfig(rotation=15, blur=0, noise=0, clutter=0, margin=0.3)
    right, wrong = [], []
    for seed in range(6):
        img, boxes = ocr.render_word("mmmmmmmmm", np.random.default_rng(seed), cfg)
        ink = np.abs(img.astype(float) - img[0, 0]) > 60

        def held(bx):
            inside = np.zeros_like(ink)
            for x0, y0, x1, y1 in bx:
                inside[
                    max(0, int(y0)) : int(np.ceil(y1)) + 1,
                    max(0, int(x0)) : int(np.ceil(x1)) + 1,
                ] = True
            return (ink & inside).sum() / ink.sum()

        mirrored = boxes.copy()
        mirrored[:, [1, 3]] = boxes[::-1][
            :, [1, 3]
        ]  # the boxes' heights of the opposite tilt
        right.append(held(boxes))
        wrong.append(held(mirrored))
    assert min(right) > 0.97 and np.mean(wrong) < np.mean(right) - 0.03, (right, wrong)


# --- blocks and decoder
# -----------------------------------------------------------------------------------


def test_recurrent_shared_kernel_gets_every_iterations_gradient():
    torch.manual_seed(0)
    shared, unshared = (
        ocr.RecurrentConv(4, 3).double(),
        ocr.RecurrentConv(4, 3, shared=False).double(),
    )
    unshared.W_f.load_state_dict(shared.W_f.state_dict())
    for w in unshared.W_r:
        w.load_state_dict(shared.W_r[0].state_dict())
    x = torch.randn(2, 4, 9, 9, dtype=torch.float64)
    torch.testing.assert_close(shared(x), unshared(x))
    shared(x).sum().backward()
    unshared(x).sum().backward()
    torch.testing.assert_close(
        shared.W_r[0].weight.grad, sum(w.weight.grad for w in unshared.W_r)
    )


def test_decoder_follows_the_captioner_protocol():
    torch.manual_seed(0)
    vocab = ocr.char_vocab()
    model = ocr.OCRModel(
        ocr.OCRConfig(channels=8, feature_dim=16, hidden_dim=24, attention_dim=12),
        vocab,
    ).eval()
    data = ocr.WordImages(["cat", "zebra", "oxygen", "ab"], 5, seed=0)
    x, caps, lengths = data.batch(range(5), vocab)
    a = model.encoder(x)
    assert a.shape == (5, 32, 16)
    logits, alpha = model.decoder(a, caps, lengths)
    state, steps = model.decoder.init_state(a), []
    for t in range(caps.shape[1] - 1):
        lp, state, _ = model.decoder.step(caps[:, t], state)
        steps.append(lp)
    torch.testing.assert_close(
        torch.stack(steps, 1), logits.log_softmax(-1), atol=1e-5, rtol=1e-5
    )
    g, b1 = greedy(model.decoder, a, 14), beam_search(model.decoder, a, 1, 14)
    assert [c.tokens for c in g] == [c.tokens for c in b1]
    batched = beam_search(model.decoder, a, 3, 14)
    for i in range(5):
        one = beam_search(model.decoder, a[i : i + 1], 3, 14)[0]
        assert (
            one.tokens == batched[i].tokens
            and abs(one.logprob - batched[i].logprob) < 1e-4
        )
    reads = model.read(x, beam_size=3)
    assert [r["text"] for r in reads] == [
        "".join(vocab.decode(c.tokens)) for c in batched
    ]


# --- metrics --------------------------------------------------------------------------
# --------------------


def test_metrics():
    assert (
        ocr.edit_distance("kitten", "sitting") == 3
        and ocr.edit_distance("", "abc") == 3
    )
    assert ocr.char_error_rate(["abc", "de"], ["abc", "xe"]) == pytest.approx(1 / 5)
    assert ocr.char_error_rate(["abc"], [""]) == 1.0
    # edit distances 2 (house), 2 (horse), 1 (hose: delete the r)
    assert ocr.closest_word("hrose", ["house", "horse", "hose"]) == "hose"
    # a tie goes to the first in the lexicon
    assert ocr.closest_word("abc", ["abd", "abe"]) == "abd"
    assert ocr.closest_word("abc", ["abe", "abd"]) == "abe"
    assert ocr.closest_word("horsee", ["house", "horse"]) == "horse"
    alpha = torch.zeros(2, 32)
    alpha[0, 3] = 1
    alpha[1, 20] = 1  # peaks at x = 14 and x = 82 for width 128
    assert ocr.attention_in_box(
        alpha, np.array([[10, 0, 20, 5], [10, 0, 20, 5]]), 128
    ).tolist() == [True, False]


# --- image files ----------------------------------------------------------------------
# --------------------


@pytest.fixture
def word_png(tmp_path):
    img, _ = ocr.render_word(
        "mode", np.random.default_rng(0), ocr.RenderConfig(noise=0, clutter=0, blur=0)
    )
    return img


@pytest.mark.parametrize(
    "mode", ["L", "RGB", "RGBA", "LA", "P", "I;16", "I", "1", "CMYK"]
)
def test_image_modes_read_alike(tmp_path, word_png, mode):
    base = Image.fromarray(word_png)
    if mode == "I;16":
        im = Image.fromarray(word_png.astype(np.uint16) * 257)
    elif mode == "I":
        im = Image.fromarray(word_png.astype(np.int32) * 257, mode="I")
    elif mode == "P":
        im = base.convert("RGB").quantize(256)
    elif mode == "1":
        base = base.point(lambda v: 255 if v > 127 else 0)
        im = base.convert("1")
    else:
        im = base.convert(mode)
    path = tmp_path / ("w.tif" if mode in ("CMYK", "I") else "w.png")
    im.save(path)
    arr = ocr.load_word_image(path)
    assert arr.shape == (32, 128) and arr.dtype == np.uint8
    base.save(tmp_path / "ref.png")
    diff = np.abs(
        arr.astype(int) - ocr.load_word_image(tmp_path / "ref.png").astype(int)
    )
    assert diff.mean() < 1.5 and diff.max() <= 4


def test_transparent_background_is_white(tmp_path):
    rgba = np.zeros((20, 60, 4), np.uint8)
    rgba[5:15, 10:50, 3] = 255  # black text on a transparent page
    Image.fromarray(rgba, "RGBA").save(tmp_path / "t.png")
    arr = ocr.load_word_image(tmp_path / "t.png", 32, 128)
    assert arr[0, 0] == 255 and arr[16, 40] == 0


def test_bad_image_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.png"):
        ocr.load_word_image(tmp_path / "missing.png")
    (tmp_path / "junk.png").write_bytes(b"not an image")
    with pytest.raises(ValueError, match="junk.png"):
        ocr.load_word_image(tmp_path / "junk.png")
    Image.fromarray(np.full((4, 4), 70000, np.int32), mode="I").save(
        tmp_path / "big.tif"
    )
    with pytest.raises(ValueError, match="big.tif.*0–65535"):
        ocr.load_word_image(tmp_path / "big.tif")


# --- command line ---------------------------------------------------------------------
# --------------------


def test_cli_train_evaluate_read(checkpoint, tmp_path, monkeypatch, capsys, word_png):
    m = json.loads((checkpoint.parent / "metrics.json").read_text())
    assert m["data"].startswith("word images drawn from fonts; words: ")  # its origin
    assert (
        m["steps"] == 3
        and m["n"] == 12
        and 0 <= m["cer"]
        and "word_accuracy_lexicon" in m
    )
    assert (
        run_main(
            monkeypatch,
            [
                "ocr",
                "evaluate",
                "--checkpoint",
                str(checkpoint),
                "--json",
                str(tmp_path / "ev.json"),
                "--beam-size",
                "2",
            ],
        )
        == 0
    )
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (
        printed == json.loads((tmp_path / "ev.json").read_text())
        and printed["n"] == 12
        and printed["beam_size"] == 2
    )
    paths = []
    for mode in ("RGBA", "P"):
        paths.append(tmp_path / f"{mode}.png")
        Image.fromarray(word_png).convert(mode).save(paths[-1])
    assert (
        run_main(
            monkeypatch,
            ["ocr", "read", "--checkpoint", str(checkpoint), *map(str, paths)],
        )
        == 0
    )
    lines = [json.loads(l) for l in capsys.readouterr().out.strip().splitlines()]
    assert [l["image"] for l in lines] == list(map(str, paths))
    assert all(set(l["text"]) <= set(ocr.ALPHABET) and l["logprob"] <= 0 for l in lines)


def test_cli_help_lists_the_commands(monkeypatch, capsys):
    with pytest.raises(SystemExit) as e:
        run_main(monkeypatch, ["ocr", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and all(c in out for c in ("train", "evaluate", "read"))


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["ocr", "train", "--steps", "0"], "--steps"),
        (["ocr", "train", "--lr", "nan"], "--lr"),
        (["ocr", "train", "--lr", "1e39"], "--lr"),
        (["ocr", "train", "--time-budget", "-1"], "--time-budget"),
        (["ocr", "train", "--iterations", "100000"], "--iterations"),
        (["ocr", "train", "--n-train", "200001"], "--n-train"),
        (
            ["ocr", "read", "--checkpoint", "x.pt", "--beam-size", "101", "a.png"],
            "--beam",
        ),
        (["ocr", "train", "--encoder", "lstm"], "--encoder"),
        (["ocr", "read", "--checkpoint", "x.pt"], "IMAGE"),
    ],
)
def test_cli_bad_flags(monkeypatch, capsys, argv, needle):
    with pytest.raises(SystemExit) as e:
        run_main(monkeypatch, argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and needle in err and "Traceback" not in err


def test_cli_bad_files_one_line(checkpoint, tmp_path, monkeypatch, capsys):
    def one_line_error(argv, needle):
        assert run_main(monkeypatch, argv) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err, err

    one_line_error(
        ["ocr", "read", "--checkpoint", str(checkpoint), str(tmp_path / "nope.png")],
        "nope.png",
    )
    one_line_error(
        ["ocr", "evaluate", "--checkpoint", str(tmp_path / "nope.pt")], "nope.pt"
    )
    (tmp_path / "bad.pt").write_bytes(b"garbage")
    one_line_error(
        [
            "ocr",
            "read",
            "--checkpoint",
            str(tmp_path / "bad.pt"),
            str(tmp_path / "x.png"),
        ],
        "bad.pt",
    )
    torch.save({"model": {}}, tmp_path / "other.pt")
    one_line_error(
        ["ocr", "evaluate", "--checkpoint", str(tmp_path / "other.pt")],
        "ocr",
    )
    before = checkpoint.read_bytes()
    one_line_error(
        ["ocr", "train", "--out", str(checkpoint.parent), *TINY], "--overwrite"
    )
    assert checkpoint.read_bytes() == before  # earlier work untouched


@pytest.mark.parametrize(
    "content,why",
    [
        ("[1, 2]", "not a Karpathy-format caption file"),
        ('{"images": 5}', "not a Karpathy-format caption file"),
        ('{"images": [{"x": 1}]}', "KeyError: 'sentences'"),
        ('{"images": [{"sentences": [{"tokens": [1, 2]}]}]}', "a list of words"),
        ('{"images": [{"sentences": [{"tokens": "dog cat"}]}]}', "a list of words"),
        ('{"images": [{"sentences": [{"tokens": ["a", "x"]}]}]}', "gives 0 distinct"),
        ('{"images": [{"sentences": [{"tokens": ["dog"]}]}]}', "gives 1 distinct"),
    ],
    ids=["a list", "images 5", "no sentences", "numbers", "a string", "none", "one"],
)
def test_a_bad_word_list_is_one_line_naming_the_file(
    monkeypatch, tmp_path, capsys, content, why
):
    """Issue 59: a Flickr8k caption file that cannot give the OCR word list is one
    error naming the file, from Python and from `ocr train` (it was a TypeError or
    KeyError traceback, or "the word list is empty" without the file)."""
    from sat_tutorial.cli import main

    d = tmp_path / "flickr8k"
    d.mkdir()
    f = d / "dataset_flickr8k.json"
    f.write_text(content)
    monkeypatch.setenv("SAT_TUTORIAL_DATA", str(tmp_path))
    with pytest.raises(ValueError, match=why) as e:
        ocr.load_words()
    assert str(f) in str(e.value) and "\n" not in str(e.value)
    argv = ["ocr", "train", "--out", str(tmp_path / "run"), "--steps", "1"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"error: {f}" in err, err
