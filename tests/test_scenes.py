import numpy as np
import torch

from sat_tutorial.data import CaptionDataset, Vocab, collate_captions
from sat_tutorial.metrics import ground_tokens
from sat_tutorial.scenes import (
    WORD_MEANING,
    make_scenes,
    relation,
    scene_splits,
)


def test_deterministic_and_independent_of_order():
    a = make_scenes(30, seed=5)
    b = make_scenes(30, seed=5)
    assert all(
        (x.array == y.array).all()
        and x.captions == y.captions
        and x.grounding == y.grounding
        for x, y in zip(a, b)
    )
    assert (make_scenes(31, seed=5)[30].array != a[29].array).any()
    assert not all(
        (x.array == y.array).all() for x, y in zip(a, make_scenes(30, seed=6))
    )


def test_every_scene_is_well_formed():
    for r in make_scenes(300, seed=11):
        objs, boxes = r.extra["objects"], r.extra["boxes"]
        assert (
            1 <= len(objs) <= 3
            and len(r.captions) == 5
            and len({" ".join(c) for c in r.captions}) == 5
        )
        assert len({(o["colour"], o["shape"]) for o in objs}) == len(objs)
        for i, bi in enumerate(boxes):  # boxes inside the image, disjoint
            assert 0 <= bi[0] < bi[2] <= 64 and 0 <= bi[1] < bi[3] <= 64
            for bj in boxes[i + 1 :]:
                assert (
                    bi[2] <= bj[0] or bj[2] <= bi[0] or bi[3] <= bj[1] or bj[3] <= bi[1]
                )
        for toks, gr in zip(r.captions, r.grounding):
            assert len(toks) == len(gr)
            assert ground_tokens(toks, objs) == gr
            assert {g for g in gr if g >= 0} == set(
                range(len(objs))
            )  # every caption names every object
            for w, g in zip(toks, gr):
                if g >= 0:
                    attr, val = WORD_MEANING[w]
                    assert objs[g][attr] == val


def test_main_caption_relation_is_true():
    for r in make_scenes(200, seed=12):
        objs = r.extra["objects"]
        if len(objs) < 2:
            continue
        toks, gr = r.captions[0], r.grounding[0]
        order = [g for i, g in enumerate(gr) if g >= 0 and (i == 0 or gr[i - 1] != g)]
        rel = " ".join(toks)
        said = next(
            x
            for x in ("above", "below", "to the left of", "to the right of")
            if f" {x} " in f" {rel} "
        )
        assert relation(objs[order[0]], objs[order[1]]) == said


def test_splits_disjoint_and_pipeline_batches():
    sp = scene_splits(100, 20, 50)
    train = {r.array.tobytes() for r in sp["train"]}
    assert not train & {r.array.tobytes() for r in sp["test"]}
    v = Vocab.build((c for r in sp["train"] for c in r.captions), min_count=1)
    ds = CaptionDataset(
        sp["train"],
        v,
        transform=lambda im: (
            torch.from_numpy(np.array(im)).permute(2, 0, 1).float() / 255
        ),
    )
    b = collate_captions([ds[i] for i in range(8)])
    assert b["images"].shape == (8, 3, 64, 64) and b["captions"].shape[0] == 8


def test_scenes_round_trip_through_karpathy_files(tmp_path):
    "Scenes written in Karpathy's format read back as the same records, pixel for pixel."
    import numpy as np
    from PIL import Image
    from sat_tutorial.karpathy import load_karpathy, write_karpathy
    from sat_tutorial.scenes import scene_splits

    sp = scene_splits(20, 0, 10)
    p = write_karpathy(tmp_path, {"train": sp["train"], "test": sp["test"]})
    back = load_karpathy(p, tmp_path / "images")
    assert len(back) == 30
    for r, q in zip(sp["train"] + sp["test"], back):
        assert (r.split, r.captions, r.raw) == (q.split, q.captions, q.raw)
        assert r.grounding == q.grounding
        assert r.extra["boxes"] == q.extra["boxes"]
        assert (np.asarray(Image.open(q.path)) == r.array).all()
