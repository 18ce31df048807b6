"""Checks moved out of notebook 01's reading path, kept as the notebook ran them: the
bad-input catalogue of `load_karpathy`, the missing-image policy, every image mode and
bad file, the dataset's skips and long captions, and the feature store's writing,
refusals, assembly and truncation."""

import json, tempfile, warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from fastcore.test import (
    test_close as check_close,
    test_eq as check_eq,
    test_fail as check_fails,
)
from PIL import Image
from torch.utils.data import DataLoader

from sat_tutorial.core import data_root
from sat_tutorial.feature_store import FeatureStore
from sat_tutorial.data import CaptionDataset, ImageRecord, Vocab, collate_captions
from sat_tutorial.karpathy import (
    MIRROR_WORDS,
    image_transform,
    load_dataset,
    load_image,
    load_karpathy,
)


def _write(d, images, mk_files=True):
    d = Path(d)
    for im in images:
        if mk_files:
            Image.new("RGB", (8, 8), (255, 0, 0)).save(d / im["filename"])
    (d / "caps.json").write_text(json.dumps({"images": images}))
    return d / "caps.json"


def _ok(name, split="train", caps=("a red square",)):
    return {"filename": name, "split": split, "sentences": [{"raw": c} for c in caps]}


def test_load_karpathy_bad_input_one_case_at_a_time():
    with tempfile.TemporaryDirectory() as d:
        p = _write(
            d,
            [
                _ok("a.png"),
                _ok("b.png", caps=()),
                _ok("c.png", caps=("a red square", " . ")),
                _ok("d.png", "restval"),
            ],
        )
        (Path(d) / "e.png").unlink(missing_ok=True)
        js = json.loads(p.read_text())
        js["images"].append(_ok("e.png"))
        p.write_text(json.dumps(js))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            recs = load_karpathy(p, restval_to_train=True, max_missing=0.5)
        check_eq([r.filename for r in recs], ["a.png", "c.png", "d.png"])
        check_eq(
            recs[1].captions, [["a", "red", "square"]]
        )  # the empty caption went, the image stayed
        check_eq(recs[2].split, "train")  # restval merged
        msgs = [str(x.message) for x in w]
        assert any("1 images with no captions" in m for m in msgs) and any(
            "1 empty captions" in m for m in msgs
        )
        assert any(
            f"1 of 4 images listed in {p} are missing under {d} (first: e.png)" in m
            for m in msgs
        )
        check_fails(
            lambda: load_karpathy(p, restval_to_train=True),
            contains="1 of 4 images listed",
        )  # 25%: refused at the default 1%
        p.write_text('{"images": [ {"filename": "a.png", }')
        check_fails(
            lambda: load_karpathy(p), contains="caps.json: malformed JSON at line 1"
        )
        p.write_text(
            json.dumps({"images": [{"filename": "a.png", "split": "training"}]})
        )
        check_fails(lambda: load_karpathy(p), contains="has split 'training'")


def test_missing_image_policy_on_200_images():
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "images").mkdir()
        ims = [_ok(f"{i:03d}.png") for i in range(200)]
        for im in ims:
            Image.new("RGB", (4, 4)).save(d / "images" / im["filename"])
        (d / "dataset_flickr8k.json").write_text(json.dumps({"images": ims}))
        (d / "images" / "007.png").unlink()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            check_eq(len(load_dataset("flickr8k", d)["train"]), 199)
        check_eq(len(w), 1)
        assert "1 of 200 images listed" in str(w[0].message) and "007.png" in str(
            w[0].message
        )
        for i in range(40):
            (d / "images" / f"{100 + i}.png").unlink()
        check_fails(
            lambda: load_dataset("flickr8k", d), contains="41 of 200 images listed"
        )


def test_image_modes_bad_files_exif_and_bombs():
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        Image.new("L", (4, 4), 128).save(d / "grey.png")
        Image.new("RGBA", (4, 4), (255, 0, 0, 0)).save(
            d / "clear.png"
        )  # fully transparent red -> white
        Image.new("CMYK", (4, 4), (0, 255, 255, 0)).save(d / "cmyk.jpg")  # red in CMYK
        Image.new("RGB", (4, 4), (0, 0, 255)).convert("P").save(d / "pal.png")
        Image.fromarray(np.full((4, 4), 65535, np.uint16)).save(
            d / "deep.png"
        )  # 16-bit white
        for f, rgb in [
            ("grey.png", (128,) * 3),
            ("clear.png", (255,) * 3),
            ("pal.png", (0, 0, 255)),
            ("deep.png", (255,) * 3),
        ]:
            im = load_image(d / f)
            check_eq(im.mode, "RGB")
            check_eq(im.getpixel((0, 0)), rgb)
        r, g, b = load_image(d / "cmyk.jpg").getpixel((0, 0))
        assert r > 200 and g < 60 and b < 60
        Image.new("RGB", (64, 64), (10, 200, 30)).save(d / "full.jpg")
        (d / "cut.jpg").write_bytes((d / "full.jpg").read_bytes()[:300])
        (d / "text.jpg").write_text("not an image")
        (d / "folder.png").mkdir()
        for f in ["cut.jpg", "text.jpg", "none.jpg", "folder.png"]:
            check_fails(lambda: load_image(d / f), contains=f)
        a = np.zeros((8, 8, 3), np.uint8)
        a[:, :4] = 255  # white on the left as stored
        ex = Image.Exif()
        ex[0x0112] = 2  # orientation 2: shown mirrored left to right
        Image.fromarray(a).save(d / "mirrored.png", exif=ex)
        check_eq(
            np.asarray(load_image(d / "mirrored.png"))[0, :, 0].tolist(),
            [0] * 4 + [255] * 4,
        )  # white on the right as shown
        old = Image.MAX_IMAGE_PIXELS
        Image.MAX_IMAGE_PIXELS = 16  # a bomb, scaled down: 64 pixels > 2 × 16
        try:
            check_fails(
                lambda: load_image(d / "full.jpg"),
                contains="full.jpg: refused, too many pixels",
            )
        finally:
            Image.MAX_IMAGE_PIXELS = old


def test_dataset_with_an_unreadable_image_and_a_very_long_caption():
    with tempfile.TemporaryDirectory() as d:
        p = _write(d, [_ok("a.png"), _ok("b.png", caps=(" ".join(["red"] * 80),))])
        (Path(d) / "b.png").write_text("garbage")
        recs = load_karpathy(
            p, check_files=False
        )  # load_karpathy would refuse the garbage file; here it reaches the dataset
        voc = Vocab.build((c for r in recs for c in r.captions), min_count=1)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            ds = CaptionDataset(recs, voc, image_transform(8), max_len=20)
            b = collate_captions([ds[0], ds[1]])
        assert any("1 captions longer than max_len=20" in str(x.message) for x in w)
        assert any("b.png" in str(x.message) for x in w)
        check_eq(b["skipped"], 1)
        check_eq(b["images"].shape[0], 1)
        check_eq(len(ds[1] or {}), 0)
        check_eq(ds.n_failed, 2)
        check_eq(
            ds.caption_lengths(), [len(ds[0]["caption"]), 22]
        )  # without loading: the 80-word caption cut to 20 words + <start>, <end>
        check_eq(
            len(
                CaptionDataset(recs, voc, max_len=20, per_caption=False)
                .records[1]
                .raw[0]
                .split()
            ),
            80,
        )  # refs kept whole


def test_feature_store_rows_refusals_assembly_and_truncation():
    with tempfile.TemporaryDirectory() as d:
        keys = [f"img{i}.jpg" for i in range(5)]
        a = torch.rand(5, 49, 16) * 10  # (N, L, D), ReLU-like scale
        st = FeatureStore.create(
            Path(d) / "f.h5", keys, 49, 16, {"backbone": "resnet50"}
        )
        st.write([3, 0, 1], a[[3, 0, 1]])
        check_eq(st.done.tolist(), [True, True, False, True, False])
        check_fails(lambda: st.check(), contains="only 3 of 5 rows")
        st.write([2], a[[2]])
        st.mark_failed([4])
        st.check(keys, backbone="resnet50")
        check_fails(lambda: st["img4.jpg"], contains="could not be read")
        st.close()
        with FeatureStore(Path(d) / "f.h5") as st:
            check_close(
                st["img3.jpg"], a[3], eps=1e-2
            )  # float16: ~3 significant digits
            assert (st["img3.jpg"] - a[3]).abs().max() <= 10 * 2**-11
            check_fails(
                lambda: st.check(backbone="vgg16"),
                contains="made with backbone='resnet50'",
            )
            check_fails(
                lambda: st.check(keys + ["x.jpg"]),
                contains="lacks features for 1 of 6 images",
            )
            recs = [
                ImageRecord(i, k, None, "train", [["a", "b"]], ["a b"])
                for i, k in enumerate(keys)
            ]
            check_eq(st.load_record(recs[3]).dtype, torch.float16)
            check_eq(st.load_record(recs[3]).float(), st["img3.jpg"])
            ds = CaptionDataset(
                recs, Vocab.build([["a", "b"]], 1), loader=st.load_record
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                check_eq(
                    collate_captions([ds[0], ds[1], ds[4]])["images"].shape, (2, 49, 16)
                )
        (Path(d) / "bad.h5").write_text("x")
        check_fails(
            lambda: FeatureStore(Path(d) / "bad.h5"),
            contains="bad.h5 is not a readable HDF5",
        )
        parts = [
            (0, a[:2].numpy(), np.array([False, False])),
            (2, a[2:].numpy(), np.array([False, True, False])),
        ]
        with FeatureStore.assemble(
            Path(d) / "full.h5", keys, 49, 16, {"backbone": "resnet50"}, parts
        ) as st:
            st.check(keys, backbone="resnet50")
            check_close(st["img0.jpg"], a[0], eps=1e-2)
            check_eq(st.failed.tolist(), [False, False, False, True, False])
        check_eq(
            sorted(p.name for p in Path(d).iterdir()), ["bad.h5", "f.h5", "full.h5"]
        )  # no temporary file left behind
        check_fails(
            lambda: FeatureStore.assemble(
                Path(d) / "gap.h5", keys, 49, 16, {}, parts[1:]
            ),
            contains="expected row 0",
        )
        assert not (Path(d) / "gap.h5").exists()
        raw = (Path(d) / "full.h5").read_bytes()
        (Path(d) / "cut.h5").write_bytes(
            raw[: len(raw) * 2 // 3]
        )  # a copy that stopped two thirds of the way

        def _open_and_check():
            with FeatureStore(Path(d) / "cut.h5") as st:
                st.check()

        check_fails(_open_and_check, contains="cut.h5")


_f8k = data_root() / "flickr8k" / "dataset_flickr8k.json"


@pytest.mark.skipif(
    not _f8k.exists(), reason="Flickr8k is not under $SAT_TUTORIAL_DATA"
)
def test_flickr8k_records_a_real_batch_and_the_mirror_word_count():
    recs = load_karpathy(_f8k, _f8k.parent / "images")
    check_eq(len(recs), 8000)
    check_eq(Counter(r.split for r in recs), Counter(train=6000, val=1000, test=1000))
    check_eq({len(r.captions) for r in recs}, {5})
    recs = load_karpathy(_f8k, _f8k.parent / "images", splits=["val"])[:8]
    voc = Vocab.build((c for r in recs for c in r.captions), min_count=1)
    dl = DataLoader(
        CaptionDataset(recs, voc, image_transform(224)),
        batch_size=4,
        collate_fn=collate_captions,
    )
    b = next(iter(dl))
    check_eq(b["images"].shape, (4, 3, 224, 224))
    check_eq(b["captions"].shape[0], 4)
    check_eq(b["captions"][:, 0], torch.ones(4, dtype=torch.long))
    for row, n in zip(b["captions"], b["lengths"]):
        check_eq(row[n - 1].item(), Vocab.end)
        assert (row[n:] == Vocab.pad).all()
    _tr = load_karpathy(_f8k, splits=["train"], check_files=False)
    check_eq(
        (len(_tr), sum(w in MIRROR_WORDS for r in _tr for c in r.captions for w in c)),
        (6000, 127),
    )
