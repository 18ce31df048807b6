"""The model zoo as it ships: every model loads by name, its recomputed slice metric
agrees with its manifest entry, the whole zoo fits its budget, a damaged file is one
line, and the names work in the command line and the Python API."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from sat_tutorial.core import InputError
from sat_tutorial.pretrained import TOLERANCE, slice_agrees, slice_metric
from sat_tutorial.runs import ZOO_DIR, load_run, run_path, sha256_file, zoo_manifest

ENTRIES = {e["name"]: e for e in zoo_manifest()}
EXE = Path(sys.executable).parent / "sat-tutorial"
KEYS = {"name", "kind", "paper", "data", "metrics", "command", "bytes", "sha256"}


def test_the_zoo_ships_and_fits_its_budget():
    assert ENTRIES, f"no models in {ZOO_DIR}/manifest.json"
    total = sum(e["bytes"] for e in ENTRIES.values())
    assert total <= 40 * 10**6, f"the zoo is {total / 1e6:.1f} MB, over 40"
    for e in ENTRIES.values():
        path = ZOO_DIR / e["file"]
        assert path.stat().st_size == e["bytes"], e["name"]
        assert sha256_file(path) == e["sha256"], e["name"]
        assert KEYS <= set(e), (e["name"], KEYS - set(e))
        assert e["command"].startswith("sat-tutorial "), e["name"]


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_slice_metric_matches_the_manifest(name):
    "The manifest cannot drift from the weights: each slice is recomputed here."
    e = ENTRIES[name]
    rec = load_run(name, e["kind"])  # by name
    try:
        got = slice_metric(rec)
    except FileNotFoundError as err:  # the slice's data is beside the checkout only
        pytest.skip(f"{name}: the data of its slice is not here ({err})")
    want = {k: v for k, v in e["slice"].items() if k != "items"}
    assert slice_agrees(got, want), (name, got, want, TOLERANCE)
    assert None not in want.values(), (name, want)  # a shipped model's slice is defined


def test_a_damaged_file_is_one_line(tmp_path):
    name = sorted(ENTRIES)[0]
    zoo = tmp_path / "zoo"
    shutil.copytree(ZOO_DIR, zoo, ignore=shutil.ignore_patterns("__pycache__"))
    blob = bytearray((zoo / ENTRIES[name]["file"]).read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    (zoo / ENTRIES[name]["file"]).write_bytes(bytes(blob))
    with pytest.raises(InputError) as e:
        run_path(name, zoo)
    msg = str(e.value)
    assert "\n" not in msg and f"zoo model {name}" in msg and "SHA-256" in msg
    (zoo / ENTRIES[name]["file"]).unlink()
    with pytest.raises(InputError, match="is missing; reinstall"):
        run_path(name, zoo)


def test_an_unknown_name_says_what_it_is_not():
    with pytest.raises(InputError, match="nor is it a zoo model's name"):
        load_run("no-such-model")


def test_pretrained_command_lists_the_zoo():
    r = subprocess.run(
        [str(EXE), "pretrained", "--json"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    listed = json.loads(r.stdout)
    assert [e["name"] for e in listed] == list(ENTRIES)
    r = subprocess.run(
        [str(EXE), "pretrained"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0 and all(n in r.stdout for n in ENTRIES), r.stderr


CAPTIONERS = sorted(
    n for n, e in ENTRIES.items() if e["kind"] == "captioner" and "scenes" in e["data"]
)


@pytest.mark.skipif(not CAPTIONERS, reason="the zoo has no scene captioner")
def test_a_name_captions_from_python_and_the_command_line(tmp_path):
    import sat_tutorial
    from sat_tutorial.scenes import make_scenes

    name = CAPTIONERS[0]
    scene = make_scenes(1, 12345, "test")[0]
    cap = sat_tutorial.load_captioner(name)
    r = cap(scene.array, beam_size=1)
    assert r.text and np.isfinite(r.logprob) and r.attention.shape[0] == len(r.words)
    Image.fromarray(scene.array).save(tmp_path / "scene.png")
    p = subprocess.run(
        [str(EXE), "caption", "--checkpoint", name, str(tmp_path / "scene.png")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert r.text.split()[0] in p.stdout


@pytest.mark.skipif(
    "soft-flickr8k" not in ENTRIES, reason="no soft-flickr8k in the zoo"
)
def test_the_photo_model_captions_a_photograph_offline(tmp_path):
    "README's promise: with the lite extra and no network, a real photo is captioned."
    pytest.importorskip("efficientnet_lite_pytorch", reason="the lite extra")
    data = pytest.importorskip("skimage.data", reason="scikit-image has the photo")
    Image.fromarray(data.stereo_motorcycle()[0]).save(tmp_path / "photo.jpg")
    p = subprocess.run(
        [
            str(EXE),
            "caption",
            "--checkpoint",
            "soft-flickr8k",
            str(tmp_path / "photo.jpg"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SAT_TUTORIAL_OFFLINE": "1"},
    )
    assert p.returncode == 0, p.stderr
    assert "bike" in p.stdout.split(":", 1)[1], p.stdout  # what the photo shows


@pytest.mark.skipif(
    "soft-flickr8k" not in ENTRIES, reason="no soft-flickr8k in the zoo"
)
def test_the_photo_model_is_evaluated_without_its_feature_file(tmp_path):
    "The training features are not shipped: evaluate reads the photos, as caption does."
    from sat_tutorial.core import data_root

    pytest.importorskip("efficientnet_lite_pytorch", reason="the lite extra")
    if not (data_root() / "flickr8k" / "dataset_flickr8k.json").is_file():
        pytest.skip("Flickr8k is not beside the checkout")
    argv = [
        "evaluate",
        "--checkpoint",
        "soft-flickr8k",
        "--limit",
        "4",
        "--beam-size",
        "1",
    ]
    p = subprocess.run(
        [str(EXE), *argv, "--json", str(tmp_path / "m.json")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,  # where zoo_runs/ (the training features) is not
    )
    assert p.returncode == 0, p.stderr
    assert "is not here: the photos are read through efficientnet-lite0" in p.stdout
    assert json.loads((tmp_path / "m.json").read_text())["metrics"]["n_images"] == 4


@pytest.mark.skipif("ram-mnist" not in ENTRIES, reason="the zoo has no ram-mnist")
def test_ram_evaluate_takes_a_name():
    from sat_tutorial.mnist import have_mnist

    if not have_mnist("test", download=False):
        pytest.skip("no MNIST files here: ram evaluate would score the stand-in")
    p = subprocess.run(
        [str(EXE), "ram", "evaluate", "--checkpoint", "ram-mnist", "--limit", "200"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout.strip().splitlines()[-1])
    assert res["n"] == 200
    assert abs(100 * res["error"] - ENTRIES["ram-mnist"]["slice"]["error_pct"]) <= 0.5
