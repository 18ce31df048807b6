"""The data pipeline on good and bad input: every bad case is converted, refused with
the file's name, or skipped and counted."""

import json, warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

from sat_tutorial.core import data_root
from sat_tutorial.feature_store import FeatureStore
from sat_tutorial.data import (
    CaptionDataset,
    ImageError,
    ImageRecord,
    Vocab,
    collate_captions,
)
from sat_tutorial.karpathy import (
    DATASETS,
    image_transform,
    load_dataset,
    load_image,
    load_karpathy,
    tokenize,
)


def write_dataset(d: Path, images, make_files=True):
    (d / "images").mkdir(exist_ok=True)
    for im in images:
        if make_files:
            Image.new("RGB", (16, 16), (0, 128, 255)).save(
                d / "images" / im["filename"]
            )
    p = d / "caps.json"
    p.write_text(json.dumps({"images": images}))
    return p


def entry(name, split="train", caps=("a blue square",)):
    return {
        "filename": name,
        "split": split,
        "sentences": [{"raw": c, "tokens": tokenize(c)} for c in caps],
    }


def test_tokenize_matches_karpathy_on_flickr8k():
    p = data_root() / "flickr8k" / "dataset_flickr8k.json"
    if not p.exists():
        pytest.skip("flickr8k not available")
    sents = [s for im in json.loads(p.read_text())["images"] for s in im["sentences"]]
    same = sum(tokenize(s["raw"]) == s["tokens"] for s in sents)
    assert same / len(sents) > 0.998


def test_vocab_min_count_and_roundtrip(tmp_path):
    v = Vocab.build([["a", "b"], ["a", "c"], ["a", "b"]], min_count=2)
    assert v.itos[4:] == ["a", "b"]
    assert v.decode(v.encode(["a", "c", "b"])) == ["a", "<unk>", "b"]
    v.save(tmp_path / "v.json")
    assert Vocab.load(tmp_path / "v.json") == v
    with pytest.raises(FileNotFoundError, match="nope.json"):
        Vocab.load(tmp_path / "nope.json")
    with pytest.raises(ValueError, match="must start with"):
        Vocab(["a", "b"])


def test_malformed_json_names_file_and_position(tmp_path):
    p = tmp_path / "broken.json"
    p.write_text('{"images": [\n {"filename": "x.jpg",, }]}')
    with pytest.raises(ValueError, match=r"broken.json: malformed JSON at line 2"):
        load_karpathy(p)
    p.write_text("[1, 2]")
    with pytest.raises(
        ValueError, match="expected a JSON object with an 'images' list"
    ):
        load_karpathy(p)
    p.write_text(json.dumps({"images": [{"split": "train"}]}))
    with pytest.raises(ValueError, match=r"images\[0\] has no 'filename'"):
        load_karpathy(p)


def test_missing_caption_file():
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_karpathy("/nonexistent/dataset_coco.json")


def test_skips_are_counted_with_one_warning_each(tmp_path):
    imgs = [
        entry("ok.jpg"),
        entry("nocaps.jpg", caps=()),
        entry("empty.jpg", caps=("a cat", "!!", "")),
        entry("gone1.jpg"),
        entry("gone2.jpg"),
    ]
    p = write_dataset(tmp_path, imgs)
    for f in ("gone1.jpg", "gone2.jpg"):
        (tmp_path / "images" / f).unlink()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        recs = load_karpathy(p, tmp_path / "images", max_missing=0.5)
    assert [r.filename for r in recs] == ["ok.jpg", "empty.jpg"]
    assert recs[1].captions == [["a", "cat"]]
    msgs = [str(x.message) for x in w]
    assert len(msgs) == 3
    assert any("skipped 1 images with no captions" in m for m in msgs)
    assert any("skipped 2 empty captions" in m for m in msgs)
    assert any(
        f"2 of 4 images listed in {p} are missing under {tmp_path / 'images'} "
        "(first: gone1.jpg, gone2.jpg)" in m
        for m in msgs
    )


def test_coco_filepath_and_restval(tmp_path):
    (tmp_path / "val2014").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "val2014" / "COCO_val2014_1.jpg")
    e = entry("COCO_val2014_1.jpg", split="restval")
    e["filepath"] = "val2014"
    p = tmp_path / "dataset_coco.json"
    p.write_text(json.dumps({"images": [e]}))
    assert load_karpathy(p, tmp_path, splits=["train"]) == []
    recs = load_karpathy(p, tmp_path, splits=["train"], restval_to_train=True)
    assert (
        recs[0].split == "train"
        and recs[0].path == tmp_path / "val2014" / "COCO_val2014_1.jpg"
    )


@pytest.mark.parametrize(
    "mode,colour,expect",
    [
        ("L", 200, (200, 200, 200)),
        ("RGBA", (0, 255, 0, 255), (0, 255, 0)),
        ("RGBA", (0, 255, 0, 0), (255, 255, 255)),
        ("LA", (0, 0), (255, 255, 255)),
        ("P", None, (255, 0, 0)),
        ("CMYK", (0, 0, 0, 0), (255, 255, 255)),
        ("1", 1, (255, 255, 255)),
    ],
)
def test_image_modes_become_rgb(tmp_path, mode, colour, expect):
    im = (
        Image.new("RGB", (8, 8), (255, 0, 0)).convert("P")
        if mode == "P"
        else Image.new(mode, (8, 8), colour)
    )
    f = tmp_path / ("x.jpg" if mode == "CMYK" else "x.png")
    im.save(f)
    out = load_image(f)
    assert out.mode == "RGB"
    assert np.abs(np.array(out.getpixel((3, 3))) - expect).max() <= 3


def test_bad_images_raise_named_errors(tmp_path):
    Image.new("RGB", (64, 64), (1, 2, 3)).save(tmp_path / "good.jpg")
    (tmp_path / "trunc.jpg").write_bytes((tmp_path / "good.jpg").read_bytes()[:200])
    (tmp_path / "zero.jpg").write_bytes(b"")
    (tmp_path / "text.png").write_text("hello")
    for f in ("trunc.jpg", "zero.jpg", "text.png", "missing.jpg"):
        with pytest.raises(ImageError, match=f):
            load_image(tmp_path / f)


def test_dataset_skips_unreadable_images_in_dataloader(tmp_path):
    imgs = [entry(f"{i}.jpg", caps=("a blue square", "a square")) for i in range(6)]
    p = write_dataset(tmp_path, imgs)
    Image.effect_noise((64, 64), 64).convert("RGB").save(
        tmp_path / "images" / "2.jpg"
    )  # noise: a JPEG with a long body
    whole = (tmp_path / "images" / "2.jpg").read_bytes()
    (tmp_path / "images" / "2.jpg").write_bytes(
        whole[: len(whole) // 2]
    )  # its header reads, its pixels are cut: found when decoded
    recs = load_karpathy(p, tmp_path / "images")
    v = Vocab.build((c for r in recs for c in r.captions), min_count=1)
    ds = CaptionDataset(recs, v, image_transform(16))
    assert len(ds) == 12
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        batches = list(DataLoader(ds, batch_size=4, collate_fn=collate_captions))
    assert sum(b["skipped"] for b in batches) == 2
    assert sum(len(b["captions"]) for b in batches) == 10
    b = batches[0]
    assert b["images"].shape[1:] == (3, 16, 16)
    assert (
        b["captions"][torch.arange(len(b["lengths"])), b["lengths"] - 1] == Vocab.end
    ).all()
    assert collate_captions([None, None]) is None


def test_long_captions_cut_for_training_kept_for_eval(tmp_path):
    long = " ".join(["blue"] * 200)
    p = write_dataset(tmp_path, [entry("a.jpg", caps=(long, "a square"))])
    recs = load_karpathy(p, tmp_path / "images")
    v = Vocab.build((c for r in recs for c in r.captions), min_count=1)
    with pytest.warns(UserWarning, match="1 captions longer than max_len=30"):
        ds = CaptionDataset(recs, v, image_transform(16), max_len=30)
    assert len(ds[0]["caption"]) == 32  # <start> + 30 + <end>
    ev = CaptionDataset(recs, v, image_transform(16), max_len=30, per_caption=False)
    assert len(ev) == 1 and ev[0]["refs"][0] == long


def test_feature_store_resume_and_refusals(tmp_path):
    keys = [f"{i}.jpg" for i in range(4)]
    st = FeatureStore.create(
        tmp_path / "f.h5", keys, 9, 8, {"backbone": "resnet101", "grid": 3}
    )
    st.write([0, 1], torch.ones(2, 9, 8))
    st.close()
    st = FeatureStore(tmp_path / "f.h5", "r+")  # reopened after an interruption
    assert st.done.tolist() == [True, True, False, False]
    with pytest.raises(ValueError, match="only 2 of 4 rows are complete"):
        st.check()
    st.write([3, 2], torch.stack([torch.full((9, 8), 3.0), torch.full((9, 8), 2.0)]))
    st.check(keys, backbone="resnet101", grid=3)
    assert (
        st["2.jpg"].mean() == 2.0
        and st["3.jpg"].mean() == 3.0
        and st["2.jpg"].dtype == torch.float32
    )
    with pytest.raises(ValueError, match="backbone='resnet101'"):
        st.check(backbone="vgg16")
    with pytest.raises(KeyError, match="no features for 'x.jpg'"):
        st["x.jpg"]
    assert st._f["feats"].dtype == np.float16
    st.close()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        FeatureStore(tmp_path / "none.h5")


def fake_flickr(root: Path, n: int, name="flickr8k"):
    """A Karpathy-format dataset of `n` tiny images under root/name (80% train, 10% val,
    10% test)."""
    d = root / name
    (d / "images").mkdir(parents=True)
    ims = [
        entry(
            f"{i:04d}.jpg", "train" if i < 0.8 * n else "val" if i < 0.9 * n else "test"
        )
        for i in range(n)
    ]
    for im in ims:
        Image.new("RGB", (8, 8), (200, 30, 30)).save(d / "images" / im["filename"])
    (d / DATASETS[name][0]).write_text(json.dumps({"images": ims}))
    return d


def test_few_missing_images_are_a_counted_skip_with_one_warning(tmp_path):
    d = fake_flickr(tmp_path, 300)
    for f in ("0003.jpg", "0250.jpg", "0299.jpg"):
        (d / "images" / f).unlink()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        recs = load_dataset("flickr8k", tmp_path)
    assert [len(recs[s]) for s in ("train", "val", "test")] == [239, 29, 29]
    assert len(w) == 1
    assert str(w[0].message).startswith(
        f"3 of 300 images listed in {d / 'dataset_flickr8k.json'} are missing "
        f"under {d / 'images'} "
        "(first: 0003.jpg, 0250.jpg, 0299.jpg)"
    )


def test_many_missing_images_fail_before_training(tmp_path):
    d = fake_flickr(tmp_path, 300)
    for i in range(0, 300, 20):
        (d / "images" / f"{i:04d}.jpg").unlink()  # 15 of 300 = 5%
    with pytest.raises(
        FileNotFoundError,
        match=r"15 of 300 images listed in .*dataset_flickr8k.json are missing "
        r"under .*images "
        r"\(first: 0000.jpg, 0020.jpg, 0040.jpg, 0060.jpg, 0080.jpg …\)\. "
        r"That is more than max_missing=1%",
    ):
        load_dataset("flickr8k", tmp_path)
    with pytest.warns(UserWarning, match="15 of 300 images listed"):
        recs = load_dataset(
            "flickr8k", d, max_missing=0.1
        )  # --data-dir naming the dataset folder itself
    assert sum(map(len, recs.values())) == 285


def test_dataset_folders_and_restval_defaults(tmp_path):
    with pytest.raises(FileNotFoundError, match="dataset_flickr30k.json there"):
        load_dataset("flickr30k", tmp_path)
    fake_flickr(tmp_path, 10, "flickr30k")
    assert len(load_dataset("flickr30k", tmp_path)["train"]) == 8
    assert DATASETS["coco"][2] is True and not DATASETS["flickr8k"][2]
    (tmp_path / "coco" / "images" / "val2014").mkdir(parents=True)
    (tmp_path / "coco" / "images" / "train2014").mkdir()
    e = [
        {**entry(f"COCO_val2014_{i}.jpg", s), "filepath": "val2014"}
        for i, s in enumerate(["restval", "val", "test", "train"])
    ]
    for x in e:
        Image.new("RGB", (8, 8)).save(
            tmp_path / "coco" / "images" / "val2014" / x["filename"]
        )
    (tmp_path / "coco" / "dataset_coco.json").write_text(json.dumps({"images": e}))
    assert (
        len(load_dataset("coco", tmp_path)["train"]) == 2
    )  # restval merged by default
    assert len(load_dataset("coco", tmp_path, restval=False)["train"]) == 1
