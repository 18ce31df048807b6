"""The data pipeline on good and bad input: every bad case is converted, refused with the file's name, or skipped and counted."""
import json, warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

from sat_tutorial.core import data_root
from sat_tutorial.data import (CaptionDataset, FeatureStore, ImageError, ImageRecord, Vocab, collate_captions, image_transform,
                               load_image, load_karpathy, tokenize)


def write_dataset(d: Path, images, make_files=True):
    (d / "images").mkdir(exist_ok=True)
    for im in images:
        if make_files: Image.new("RGB", (16, 16), (0, 128, 255)).save(d / "images" / im["filename"])
    p = d / "caps.json"
    p.write_text(json.dumps({"images": images}))
    return p


def entry(name, split="train", caps=("a blue square",)):
    return {"filename": name, "split": split, "sentences": [{"raw": c, "tokens": tokenize(c)} for c in caps]}


def test_tokenize_matches_karpathy_on_flickr8k():
    p = data_root() / "flickr8k" / "dataset_flickr8k.json"
    if not p.exists(): pytest.skip("flickr8k not available")
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
    p.write_text('[1, 2]')
    with pytest.raises(ValueError, match="expected a JSON object with an 'images' list"):
        load_karpathy(p)
    p.write_text(json.dumps({"images": [{"split": "train"}]}))
    with pytest.raises(ValueError, match=r"images\[0\] has no 'filename'"):
        load_karpathy(p)


def test_missing_caption_file():
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_karpathy("/nonexistent/dataset_coco.json")


def test_skips_are_counted_with_one_warning_each(tmp_path):
    imgs = [entry("ok.jpg"), entry("nocaps.jpg", caps=()), entry("empty.jpg", caps=("a cat", "!!", "")),
            entry("gone1.jpg"), entry("gone2.jpg")]
    p = write_dataset(tmp_path, imgs)
    for f in ("gone1.jpg", "gone2.jpg"): (tmp_path / "images" / f).unlink()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        recs = load_karpathy(p, tmp_path / "images")
    assert [r.filename for r in recs] == ["ok.jpg", "empty.jpg"]
    assert recs[1].captions == [["a", "cat"]]
    msgs = [str(x.message) for x in w]
    assert len(msgs) == 3
    assert any("skipped 1 images with no captions" in m for m in msgs)
    assert any("skipped 2 empty captions" in m for m in msgs)
    assert any("skipped 2 images whose file is missing" in m and "gone1.jpg" in m for m in msgs)


def test_coco_filepath_and_restval(tmp_path):
    (tmp_path / "val2014").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "val2014" / "COCO_val2014_1.jpg")
    e = entry("COCO_val2014_1.jpg", split="restval"); e["filepath"] = "val2014"
    p = tmp_path / "dataset_coco.json"; p.write_text(json.dumps({"images": [e]}))
    assert load_karpathy(p, tmp_path, splits=["train"]) == []
    recs = load_karpathy(p, tmp_path, splits=["train"], restval_to_train=True)
    assert recs[0].split == "train" and recs[0].path == tmp_path / "val2014" / "COCO_val2014_1.jpg"


@pytest.mark.parametrize("mode,colour,expect", [
    ("L", 200, (200, 200, 200)), ("RGBA", (0, 255, 0, 255), (0, 255, 0)), ("RGBA", (0, 255, 0, 0), (255, 255, 255)),
    ("LA", (0, 0), (255, 255, 255)), ("P", None, (255, 0, 0)), ("CMYK", (0, 0, 0, 0), (255, 255, 255)), ("1", 1, (255, 255, 255)),
])
def test_image_modes_become_rgb(tmp_path, mode, colour, expect):
    im = Image.new("RGB", (8, 8), (255, 0, 0)).convert("P") if mode == "P" else Image.new(mode, (8, 8), colour)
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
    (tmp_path / "images" / "2.jpg").write_bytes(b"\xff\xd8 truncated")
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
    assert (b["captions"][torch.arange(len(b["lengths"])), b["lengths"] - 1] == Vocab.end).all()
    assert collate_captions([None, None]) is None


def test_long_captions_cut_for_training_kept_for_eval(tmp_path):
    long = " ".join(["blue"] * 200)
    p = write_dataset(tmp_path, [entry("a.jpg", caps=(long, "a square"))])
    recs = load_karpathy(p, tmp_path / "images")
    v = Vocab.build((c for r in recs for c in r.captions), min_count=1)
    with pytest.warns(UserWarning, match="1 captions longer than max_len=30"):
        ds = CaptionDataset(recs, v, image_transform(16), max_len=30)
    assert len(ds[0]["caption"]) == 32                  # <start> + 30 + <end>
    ev = CaptionDataset(recs, v, image_transform(16), max_len=30, per_caption=False)
    assert len(ev) == 1 and ev[0]["refs"][0] == long


def test_feature_store_resume_and_refusals(tmp_path):
    keys = [f"{i}.jpg" for i in range(4)]
    st = FeatureStore.create(tmp_path / "f.h5", keys, 9, 8, {"backbone": "resnet101", "grid": 3})
    st.write([0, 1], torch.ones(2, 9, 8))
    st.close()
    st = FeatureStore(tmp_path / "f.h5", "r+")                     # reopened after an interruption
    assert st.done.tolist() == [True, True, False, False]
    with pytest.raises(ValueError, match="only 2 of 4 rows are complete"):
        st.check()
    st.write([3, 2], torch.stack([torch.full((9, 8), 3.0), torch.full((9, 8), 2.0)]))
    st.check(keys, backbone="resnet101", grid=3)
    assert st["2.jpg"].mean() == 2.0 and st["3.jpg"].mean() == 3.0 and st["2.jpg"].dtype == torch.float32
    with pytest.raises(ValueError, match="backbone='resnet101'"):
        st.check(backbone="vgg16")
    with pytest.raises(KeyError, match="no features for 'x.jpg'"):
        st["x.jpg"]
    assert st._f["feats"].dtype == np.float16
    st.close()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        FeatureStore(tmp_path / "none.h5")
