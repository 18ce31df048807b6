import base64

import numpy as np
import pytest
import torch

from sat_tutorial.bottom_up import (
    RegionFeatures,
    detect_regions,
    load_bottom_up_npz,
    load_detector,
    read_bottom_up_tsv,
)
from sat_tutorial.butd import PaperBUTDCaptioner, add_scene_regions
from sat_tutorial.butd_beyond import BUTDCaptioner
from sat_tutorial.data import CaptionDataset, Vocab, collate_captions
from sat_tutorial.decoding import beam_search, greedy
from sat_tutorial.encoders import SceneRegionEncoder, box_geometry, pool_regions
from sat_tutorial.scene_cnn import scene_transform
from sat_tutorial.scenes import make_scenes
from sat_tutorial.captioner import encode
from fakes import caption_batch


def small_model(**kw):
    torch.manual_seed(0)
    return BUTDCaptioner(15, 8, embed_dim=6, hidden_dim=7, attention_dim=5, **kw)


def test_attention_over_regions_is_a_distribution_and_loss_is_plain_cross_entropy():
    "(The protocol itself is checked for every captioner in test_captioners.py.)"
    m = small_model(dropout=0.5)
    caps, lengths = caption_batch()
    _, attn = m(torch.randn(3, 10, 8), caps, lengths)
    assert torch.allclose(attn.sum(-1), torch.ones(3, 5), atol=1e-6)
    loss, stats = m.loss(torch.randn(3, 10, 8), caps, lengths)
    assert set(stats) == {"nll"} and loss.item() == pytest.approx(stats["nll"])


def test_decoding_through_beam_search():
    m = small_model(dropout=0.0)
    feats = torch.randn(4, 6, 8)
    out = beam_search(m, feats, beam_size=3, max_len=7)
    assert len(out) == 4
    for c in out:
        assert c.attn.shape == (len(c.tokens), 6) and len(c.tokens) <= 7
    # beam 1 is greedy; a batch decodes as each image alone
    assert [c.tokens for c in beam_search(m, feats, 1, 7)] == [
        c.tokens for c in greedy(m, feats, 7)
    ]
    alone = [beam_search(m, feats[i : i + 1], 3, 7)[0].tokens for i in range(4)]
    assert alone == [c.tokens for c in out]


def test_scene_regions_deterministic_complete_and_batched():
    recs = add_scene_regions(make_scenes(30, seed=3), n_regions=5, seed=1)
    again = add_scene_regions(make_scenes(30, seed=3)[::-1], n_regions=5, seed=1)[::-1]
    assert [r.extra["regions"] for r in recs] == [r.extra["regions"] for r in again]
    other = add_scene_regions(make_scenes(30, seed=3), n_regions=5, seed=2)
    assert [r.extra["regions"] for r in recs] != [r.extra["regions"] for r in other]
    firsts = set()
    for r in recs:
        reg = r.extra["regions"]
        assert len(reg) == 5 and all(list(b) in reg for b in r.extra["boxes"])
        assert all(0 <= x0 < x1 <= 64 and 0 <= y0 < y1 <= 64 for x0, y0, x1, y1 in reg)
        firsts.add(reg.index(list(r.extra["boxes"][0])))
    assert len(firsts) > 1  # object boxes are not always in the same slot
    vocab = Vocab.build((c for r in recs for c in r.captions), min_count=1)
    b = collate_captions(
        [CaptionDataset(recs, vocab, scene_transform)[i] for i in range(4)]
    )
    assert b["boxes"].shape == (4, 5, 4)
    enc = SceneRegionEncoder(16, width=8)
    assert encode(enc, b["images"], b["boxes"]).shape == (4, 5, 16)
    with pytest.raises(ValueError, match="needs region boxes"):
        encode(enc, b["images"])
    r = make_scenes(1, seed=3)[0]
    r.extra.pop("boxes")
    with pytest.raises(ValueError, match="scene_3_000000.png"):
        add_scene_regions([r])


def test_pool_regions_is_crop_mean_for_cell_aligned_boxes():
    torch.manual_seed(0)
    fmap = torch.randn(1, 4, 8, 8, dtype=torch.float64)
    cells = [[0, 0, 4, 4], [2, 6, 4, 8], [1, 3, 7, 5]]  # whole cells, even sides
    v = pool_regions(
        fmap, torch.tensor([cells], dtype=torch.float64) * 8, 1 / 8, output_size=2
    )
    ref = torch.stack(
        [fmap[0, :, y0:y1, x0:x1].mean((1, 2)) for x0, y0, x1, y1 in cells]
    )
    assert torch.allclose(v[0], ref, atol=1e-12)
    g = box_geometry(torch.tensor([[[16.0, 0, 64, 32]]]), 64, 64)
    assert torch.allclose(g, torch.tensor([[[0.25, 0, 1, 0.5, 0.375]]]))


def test_detector_shapes_padding_and_missing_weights(tmp_path):
    class Fake(
        torch.nn.Module
    ):  # two detections for the first image, none for the second
        def forward(self, images):
            return [
                {
                    "boxes": torch.tensor(
                        [[1.0, 1, 5, 5], [1, 1, 5, 5.1], [10, 2, 20, 12]]
                    ),
                    "scores": torch.tensor([0.9, 0.8, 0.5]),
                },
                {"boxes": torch.zeros(0, 4), "scores": torch.zeros(0)},
            ]

    out = detect_regions(
        Fake(), [torch.rand(3, 30, 40), torch.rand(3, 20, 24)], n_regions=3
    )
    assert out.tolist() == [
        [[1, 1, 5, 5], [10, 2, 20, 12], [0, 0, 40, 30]],
        [[0, 0, 24, 20]] * 3,
    ]  # duplicate removed, padded
    with pytest.raises(FileNotFoundError, match="missing.pth does not exist"):
        load_detector(tmp_path / "missing.pth")
    with pytest.raises(
        ValueError, match="unknown fasterrcnn_resnet50_fpn weights 'NOPE'"
    ):
        load_detector("NOPE")
    det = load_detector(
        None, "fasterrcnn_mobilenet_v3_large_320_fpn", min_size=64, max_size=64
    )  # random weights: shapes only
    assert detect_regions(det, [torch.rand(3, 48, 64)], n_regions=4).shape == (1, 4, 4)


def _b64(a):
    return base64.b64encode(
        np.ascontiguousarray(a, dtype=np.float32).tobytes()
    ).decode()


def test_tsv_loader_roundtrip_and_errors(tmp_path):
    rng = np.random.default_rng(0)
    rows = [
        ("42", rng.uniform(0, 100, (36, 4)), rng.standard_normal((36, 16))),
        ("43", rng.uniform(0, 100, (5, 4)), rng.standard_normal((5, 16))),
    ]
    p = tmp_path / "feats.tsv"
    p.write_text(
        "".join(
            f"{i}\t100\t80\t{len(b)}\t{_b64(b)}\t{_b64(f)}\textra\n" for i, b, f in rows
        )
    )  # extra column ignored
    got = list(read_bottom_up_tsv(p))
    assert [g.image_id for g in got] == ["42", "43"] and all(
        isinstance(g, RegionFeatures) for g in got
    )
    for g, (_, b, f) in zip(got, rows):
        assert (
            g.boxes.shape == (len(b), 4)
            and np.array_equal(g.features, f.astype(np.float32))
            and (g.image_w, g.image_h) == (100, 80)
        )
    _, b, f = rows[0]
    bad = {
        "short.tsv": f"42\t100\t80\t36\t{_b64(b)}\n",
        "count.tsv": f"42\t100\t80\t35\t{_b64(b)}\t{_b64(f)}\n",
        "notint.tsv": f"42\t100\tx\t36\t{_b64(b)}\t{_b64(f)}\n",
        "b64.tsv": f"42\t100\t80\t36\t{_b64(b)}\t@@notbase64@@\n",
    }
    for name, text in bad.items():
        (tmp_path / name).write_text(
            f"{rows[1][0]}\t100\t80\t5\t{_b64(rows[1][1])}\t{_b64(rows[1][2])}\n" + text
        )
        with pytest.raises(ValueError, match=f"{name}, line 2"):
            list(read_bottom_up_tsv(tmp_path / name))
    with pytest.raises(FileNotFoundError, match="nothere.tsv"):
        list(read_bottom_up_tsv(tmp_path / "nothere.tsv"))


def test_npz_loader_layouts_and_errors(tmp_path):
    rng = np.random.default_rng(1)
    f, b = (
        rng.standard_normal((36, 2048)).astype(np.float32),
        rng.uniform(0, 500, (36, 4)).astype(np.float32),
    )
    np.savez(tmp_path / "1.npz", x=f, bbox=b, image_w=640, image_h=427)
    np.savez(tmp_path / "2.npz", feat=f.T, bbox=b)  # stored (D, R)
    np.savez(tmp_path / "3.npz", feat=f)  # features only
    for name in ("1", "2", "3"):
        g = load_bottom_up_npz(tmp_path / f"{name}.npz")
        assert g.image_id == name and np.array_equal(g.features, f)
    assert (
        np.array_equal(load_bottom_up_npz(tmp_path / "1.npz").boxes, b)
        and load_bottom_up_npz(tmp_path / "1.npz").image_h == 427
    )
    assert load_bottom_up_npz(tmp_path / "3.npz").boxes is None
    np.savez(tmp_path / "mismatch.npz", x=f[:10], bbox=b)
    np.savez(tmp_path / "nofeat.npz", bbox=b)
    (tmp_path / "corrupt.npz").write_bytes(b"PK\x03\x04 this is not a zip archive")
    for name, msg in (
        ("mismatch", "36 boxes but 'x' has shape"),
        ("nofeat", "no feature array"),
        ("corrupt", "not a readable .npz"),
    ):
        with pytest.raises(ValueError, match=f"{name}.npz.*{msg}"):
            load_bottom_up_npz(tmp_path / f"{name}.npz")


def test_train_command_gives_butd_bottom_up_regions_on_scenes(tmp_path, capsys):
    """`sat-tutorial train --model butd --data scenes` trains on region boxes, and
    evaluation grounds words over those regions."""
    from sat_tutorial.cli import main
    from sat_tutorial.training import (
        evaluate,
        load_checkpoint_model,
        load_records,
        transform_for,
    )

    out = tmp_path / "butd"
    assert (
        main(
            [
                "train",
                "--model",
                "butd",
                "--data",
                "scenes",
                "--out",
                str(out),
                "--steps",
                "3",
                "--n-train",
                "40",
                "--n-val",
                "0",
                "--n-test",
                "6",
                "--batch-size",
                "8",
                "--embed-dim",
                "8",
                "--hidden-dim",
                "8",
                "--attention-dim",
                "8",
                "--feature-dim",
                "8",
                "--val-every",
                "0",
                "--ckpt-every",
                "0",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    enc, model, vocab, cfg = load_checkpoint_model(out / "best.pt").model
    assert cfg.encoder == "scene_regions" and getattr(enc, "needs_boxes", False)
    test = load_records(cfg)["test"]
    assert all(len(r.extra["regions"]) == 6 for r in test)
    m, _ = evaluate(
        enc,
        model,
        test,
        transform_for(cfg),
        vocab,
        beam_size=2,
        max_len=6,
        meteor=False,
    )
    assert m["n_images"] == 6 and 0.0 <= m.get("attention_correctness", 0.0) <= 1.0
    from PIL import Image

    Image.new("RGB", (64, 64)).save(tmp_path / "x.png")
    assert (
        main(["caption", "--checkpoint", str(out / "best.pt"), str(tmp_path / "x.png")])
        == 1
    )  # a clear error, not a traceback
    assert "region encoder 'scene_regions'" in capsys.readouterr().err


def test_checkpoint_layout_is_unchanged_and_the_paper_form_computes_the_same():
    """Checkpoints written before the paper form existed load: the same parameter names
    and shapes; both forms agree in float64."""
    m = BUTDCaptioner(11, 8, embed_dim=6, hidden_dim=7, attention_dim=5)
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == [
        ("embed.weight", (11, 6)),
        ("att_lstm.weight_ih", (28, 21)),
        ("att_lstm.weight_hh", (28, 7)),
        ("att_lstm.bias_ih", (28,)),
        ("att_lstm.bias_hh", (28,)),
        ("attention.W_a.weight", (5, 8)),
        ("attention.W_a.bias", (5,)),
        ("attention.W_h.weight", (5, 7)),
        ("attention.w.weight", (1, 5)),
        ("attention.w.bias", (1,)),
        ("lang_lstm.weight_ih", (28, 15)),
        ("lang_lstm.weight_hh", (28, 7)),
        ("lang_lstm.bias_ih", (28,)),
        ("lang_lstm.bias_hh", (28,)),
        ("W_p.weight", (11, 7)),
        ("W_p.bias", (11,)),
    ]
    paper = PaperBUTDCaptioner(
        11, 8, embed_dim=6, hidden_dim=7, attention_dim=5, dropout=0.0
    ).double()
    fused = BUTDCaptioner(
        11, 8, embed_dim=6, hidden_dim=7, attention_dim=5, dropout=0.0
    ).double()
    fused.load_state_dict(paper.state_dict())
    caps, lengths = caption_batch(V=11)
    feats = torch.randn(3, 5, 8, dtype=torch.float64)
    for a, b in zip(fused(feats, caps, lengths), paper(feats, caps, lengths)):
        assert torch.allclose(a, b, rtol=0, atol=1e-12)
    fb, pb = (
        beam_search(fused, feats, beam_size=3, max_len=7),
        beam_search(paper, feats, beam_size=3, max_len=7),
    )
    assert [c.tokens for c in fb] == [c.tokens for c in pb]
