"""The Python API at the package's top level (notebook 13_api): `load_captioner` and its
classes are loaded on first use from `sat_tutorial.api`; the console script named in
settings.ini still finds the command's `main`; and a trained checkpoint captions
photographs with consistent results."""

import configparser, importlib, subprocess, sys
from pathlib import Path

import pytest

import sat_tutorial

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["load_captioner", "ImageCaptioner", "CaptionResult"])
def test_top_level_names_come_from_the_api_module(name):
    from sat_tutorial import api

    assert getattr(sat_tutorial, name) is getattr(api, name) and name in dir(
        sat_tutorial
    )


def test_import_stays_light_until_first_use():
    code = (
        "import sys, sat_tutorial; assert 'sat_tutorial.api' not in sys.modules "
        "and 'torch' not in sys.modules; "
        "sat_tutorial.load_captioner; assert 'sat_tutorial.api' in sys.modules"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr


def test_unknown_top_level_name_is_an_attribute_error():
    with pytest.raises(
        AttributeError, match="no attribute 'load_checkpoint_captioner'"
    ):
        sat_tutorial.load_checkpoint_captioner


def test_console_script_finds_main():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "settings.ini")
    scripts = dict(
        line.split("=", 1) for line in cfg["DEFAULT"]["console_scripts"].split()
    )
    module, func = scripts["sat-tutorial"].split(":")
    from sat_tutorial.cli import main

    assert getattr(importlib.import_module(module), func) is main


# ---- captioning real photographs through `load_captioner` -------------------------

SMALL = dict(
    steps=6,
    n_train=60,
    n_val=0,
    n_test=0,
    batch_size=8,
    val_every=0,
    ckpt_every=0,
    embed_dim=16,
    hidden_dim=16,
    attention_dim=16,
    feature_dim=16,
    grid=8,
    warmup=1,
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    "A soft- and a hard-attention checkpoint, each trained for a few steps here."
    import torch
    from sat_tutorial.fit import fit
    from sat_tutorial.training import scenes_config

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("api_runs")
    for model in ("soft", "hard"):
        fit(
            scenes_config(model=model, **SMALL),
            root / model,
            progress=False,
            log=lambda *a: None,
        )
    return root


@pytest.fixture(scope="module")
def photos():
    "Two photographs that ship with scikit-image: an astronaut and a cat."
    data = pytest.importorskip("skimage.data")
    return {"astronaut": data.astronaut(), "chelsea": data.chelsea()}


def replayed_logprob(cap, image, words, finished):
    "Σ log p of the caption's words (and <end>) fed one by one through `step`."
    import torch
    from sat_tutorial.data import Vocab

    _, x = cap.prepare(image)
    model = cap.model
    with torch.no_grad():
        state = model.init_state(cap.features(x[None]))
        w, total = torch.tensor([Vocab.start]), 0.0
        ids = [cap.vocab.stoi[t] for t in words] + ([Vocab.end] if finished else [])
        for i in ids:
            lp, state, _ = model.step(w, state)
            total += float(lp[0, i])
            w = torch.tensor([i])
    return total


def test_captions_photographs_with_consistent_results(runs, photos):
    """A soft-attention checkpoint captions photographs: words from its vocabulary,
    one α per word on the grid, each a distribution, and log p finite and equal to
    the sum of the log-probabilities `step` gives the same words."""
    import math
    import torch
    from sat_tutorial import load_captioner

    cap = load_captioner(runs / "soft" / "last.pt", device="cpu")
    g = SMALL["grid"]
    for name, image in photos.items():
        r = cap(image, beam_size=3, max_len=12)
        assert r.words, name
        assert all(w in cap.vocab.stoi for w in r.words), r.words
        assert r.attention.shape == (len(r.words), g, g)
        rows = r.attention.flatten(1)
        assert (rows >= 0).all()
        assert torch.allclose(rows.sum(1), torch.ones(len(r.words)), atol=1e-5)
        assert math.isfinite(r.logprob) and r.logprob < 0
        replay = replayed_logprob(cap, image, r.words, r.finished)
        assert abs(replay - r.logprob) < 1e-4, (name, replay, r.logprob)
        assert not r.hard and r.locations is None


def test_a_batch_captions_as_one_by_one_and_any_image_form_alike(
    runs, photos, tmp_path
):
    "A list in batches gives what each image alone gives; file, PIL, array, tensor too."
    import torch
    from PIL import Image
    from sat_tutorial import load_captioner

    cap = load_captioner(runs / "soft" / "last.pt", device="cpu")
    ims = list(photos.values())
    together = cap(ims + ims[::-1], beam_size=2, max_len=12, batch_size=3)
    alone = [cap(im, beam_size=2, max_len=12) for im in ims + ims[::-1]]
    for a, b in zip(together, alone):
        assert a.words == b.words and abs(a.logprob - b.logprob) < 1e-4
        assert torch.allclose(a.attention, b.attention, atol=1e-5)
    astro = photos["astronaut"]
    Image.fromarray(astro).save(tmp_path / "astronaut.png")
    forms = [
        tmp_path / "astronaut.png",
        Image.fromarray(astro),
        astro / 255,
        torch.from_numpy(astro).permute(2, 0, 1),
    ]
    texts = {cap(f, beam_size=2, max_len=12).text for f in forms}
    assert len(texts) == 1


def test_an_ensemble_of_one_model_twice_captions_as_the_model(runs, photos):
    from sat_tutorial import load_captioner

    ck = runs / "soft" / "last.pt"
    one = load_captioner(ck, device="cpu")
    two = load_captioner([ck, ck], device="cpu")
    for image in photos.values():
        a, b = one(image, beam_size=3, max_len=12), two(image, beam_size=3, max_len=12)
        assert a.words == b.words and abs(a.logprob - b.logprob) < 1e-4
        assert not b.hard


def test_reads_are_checked_and_reach_a_hard_attention_model(runs, photos):
    """`reads` goes through the model's `set_reads` hook: a value it does not take is
    one line naming the checkpoint and the allowed values; on soft attention, one line
    saying that it applies to hard attention."""
    from sat_tutorial import load_captioner
    from sat_tutorial.core import InputError

    hard = runs / "hard" / "last.pt"
    with pytest.raises(InputError) as e:
        load_captioner(hard, device="cpu", reads="bogus")
    msg = str(e.value)
    assert "\n" not in msg and str(hard) in msg and "cannot read 'bogus'" in msg
    assert "argmax" in msg and "marginal" in msg and "expected" in msg
    with pytest.raises(InputError, match="applies to hard-attention checkpoints"):
        load_captioner(runs / "soft" / "last.pt", device="cpu", reads="marginal")
    g = SMALL["grid"]
    for reads, one_location in (("argmax", True), ("expected", False)):
        cap = load_captioner(hard, device="cpu", reads=reads)
        assert cap.model.inference == reads
        r = cap(photos["chelsea"], beam_size=2, max_len=12)
        assert all(w in cap.vocab.stoi for w in r.words)
        assert r.hard == one_location
        if one_location:
            assert len(r.locations) == len(r.words)
            assert all(0 <= i < g * g for i in r.locations)


def test_sizes_have_the_command_lines_upper_bounds(runs, photos):
    """A beam of a million, a caption of a million words or a batch of a million images
    is refused at once with one line naming the argument, as `caption --beam-size
    1000000` is (tests/test_hostile.py), before any memory is asked for."""
    from sat_tutorial import load_captioner
    from sat_tutorial.api import BATCH_SIZE, BEAM_SIZE, MAX_LEN
    from sat_tutorial.cli import build_parser
    from sat_tutorial.core import InputError

    cap = load_captioner(runs / "soft" / "last.pt", device="cpu")
    image = photos["chelsea"]
    for kw in ({"beam_size": 10**6}, {"max_len": 10**6}, {"batch_size": 10**6}):
        with pytest.raises(InputError, match=f"^{next(iter(kw))} must be an") as e:
            cap(image, **kw)
        assert "\n" not in str(e.value) and "≤" in str(e.value)
    actions = {
        a.dest: a.type
        for a in build_parser()
        ._subparsers._group_actions[0]
        .choices["caption"]
        ._actions
    }
    assert actions["beam_size"] is BEAM_SIZE and actions["max_len"] is MAX_LEN
    assert cap(image, beam_size=BEAM_SIZE.hi // 50, max_len=5).words  # in range: fine
    assert BATCH_SIZE.hi >= 16  # the default batch fits


def test_a_model_whose_weights_overflow_is_refused_not_read_out(runs, photos):
    """Issue 59: weights from a run that diverged (finite, but overflowing) caption
    nothing: one line, not "bottom bottom … (log p = nan)"."""
    from sat_tutorial import load_captioner
    import torch
    from sat_tutorial.core import InputError

    cap = load_captioner(runs / "soft" / "last.pt", device="cpu")
    assert cap(photos["chelsea"], max_len=5).words  # as trained: fine
    with torch.no_grad():
        for p in cap.model.parameters():
            p.mul_(1e30)
    with pytest.raises(InputError, match="log-probabilities are not finite") as e:
        cap(photos["chelsea"], max_len=5)
    assert "\n" not in str(e.value)


# ---- issue 59: inputs the API must refuse in one line (zoo models, no training) ----


@pytest.fixture(scope="module")
def zoo_soft():
    from sat_tutorial import load_captioner

    return load_captioner("soft-scenes", device="cpu")


@pytest.mark.parametrize(
    "image",
    ["array 0x0", "array 0x5", "tensor 0x0", "PIL 0x0"],
)
def test_an_empty_image_is_refused(zoo_soft, image):
    "An image with no pixels (0×0, 0×5) is one InputError naming it, not captioned."
    import numpy as np
    import torch
    from PIL import Image
    from sat_tutorial.core import InputError

    im = {
        "array 0x0": np.zeros((0, 0, 3), np.uint8),
        "array 0x5": np.zeros((0, 5, 3), np.uint8),
        "tensor 0x0": torch.zeros(3, 0, 0),
        "PIL 0x0": Image.new("RGB", (0, 0)),
    }[image]
    with pytest.raises(InputError, match="image 0: the image has no pixels") as e:
        zoo_soft(im)
    assert "\n" not in str(e.value)


def test_nan_float_images_are_refused_not_captioned_as_black(zoo_soft):
    "Issue 59 (fixed before): NaN pixels are not floats in [0, 1]: refused, not read as 0."
    import numpy as np
    import torch
    from sat_tutorial.core import InputError

    for im in (
        np.full((64, 64, 3), np.nan, np.float32),
        torch.full((3, 64, 64), float("nan")),
    ):
        with pytest.raises(InputError, match="must hold floats in \\[0, 1\\]"):
            zoo_soft(im)


def test_integer_arguments_take_numpy_integers_and_refuse_floats(zoo_soft):
    """beam_size=2.0 is refused in one line (it was accepted and failed inside the beam
    search); np.int64(2) is taken as 2 (it was refused), as are max_len and
    batch_size."""
    import numpy as np
    from sat_tutorial.core import InputError

    im = np.zeros((64, 64, 3), np.uint8)
    want = zoo_soft(im, beam_size=2, max_len=5).text
    for kw in ({"beam_size": 2.0}, {"max_len": 5.0}, {"batch_size": 4.0}):
        with pytest.raises(InputError, match=f"^{next(iter(kw))} must be an integer"):
            zoo_soft(im, **kw)
    got = zoo_soft(
        [im], beam_size=np.int64(2), max_len=np.int32(5), batch_size=np.int64(4)
    )
    assert got[0].text == want


@pytest.mark.parametrize(
    "boxes,why",
    [
        ([[0, 0, float("nan"), 32], [10, 10, 60, 60]], "NaN or infinite"),
        ([[32, 32, 0, 0], [10, 10, 60, 60]], "x0 < x1 and y0 < y1"),
        ([[0, 0, 32000, 32000], [10, 10, 60000, 60000]], "inside the 64×64 image"),
        ([[-5, 0, 32, 32]], "inside the 64×64 image"),
        ([[0, 0, 32]], "(R, 4)"),
        ([], "(R, 4)"),
    ],
    ids=["nan", "inverted", "x1000", "negative", "three numbers", "none"],
)
def test_region_boxes_are_checked(boxes, why):
    """BUTD's boxes: NaN, inverted (x1 < x0), outside the image the model reads (×1000)
    or of the wrong shape are one InputError naming the image and the problem."""
    import numpy as np
    from sat_tutorial import load_captioner
    from sat_tutorial.core import InputError

    cap = load_captioner("butd-scenes", device="cpu")
    im = np.zeros((64, 64, 3), np.uint8)
    assert cap(im, boxes=[[0, 0, 32, 32], [10, 10, 60, 60]]).words  # fine
    with pytest.raises(InputError, match="image 0: boxes") as e:
        cap(im, boxes=boxes)
    assert why in str(e.value) and "\n" not in str(e.value)
