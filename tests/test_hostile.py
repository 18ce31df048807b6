"""Hostile input against every captioning subcommand and DRAW (issue 43): each case asserts the exit status, one line
`… error: …` that names the culprit (flag or file), no traceback, that no file already on disk changed, and that it ends in
seconds (a hang fails by SIGALRM). RAM's cases live with RAM's tests."""

import hashlib, json, shutil, signal, struct, zlib
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from sat_tutorial.cli import main
from sat_tutorial.checkpoints import TEMP_SUFFIX, save_checkpoint
from sat_tutorial.scenes import make_scenes

from fakes import fake_dataset

LIMIT_S = 60  # a case that runs longer is a hang


@contextmanager
def deadline(seconds: int):
    "Fail (TimeoutError) instead of hanging when the body runs past `seconds`."

    def boom(*_):
        raise TimeoutError(f"still running after {seconds} s: a hang")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def png_header(width: int, height: int) -> bytes:
    "A PNG whose header claims width × height pixels (with no pixel data): a decompression bomb for Pillow's check, in 57 bytes."

    def chunk(kind, data):
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data))
        )

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IEND", b"")
    )


class Boom:  # a pickled object: weights_only loading must refuse it without running it
    def __reduce__(self):
        return (print, ("this must never run",))


def tiny_flags(steps: int = 2, n_train: int = 40, n_test: int = 4) -> list[str]:
    "`train` flags of a tiny captioner run on scenes (also tests/test_draw_cli.py's)."
    sizes = ["--embed-dim", "8", "--hidden-dim", "8", "--attention-dim", "8"]
    sizes += ["--feature-dim", "8", "--warmup", "1", "--grid", "8", "--device", "cpu"]
    data = ["--n-train", str(n_train), "--n-val", "0", "--n-test", str(n_test)]
    quiet = ["--batch-size", "8", "--val-every", "0", "--ckpt-every", "0"]
    return ["--steps", str(steps), *data, *quiet, *sizes]


TINY = tiny_flags()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    "A tiny trained run, good and bad images, bad checkpoints and broken datasets, made once."
    w = tmp_path_factory.mktemp("hostile")
    with deadline(300):
        assert main(["train", "--out", str(w / "run"), *TINY]) == 0
    Image.fromarray(make_scenes(1, seed=5)[0].array).save(w / "scene.png")
    (w / "cut.png").write_bytes((w / "scene.png").read_bytes()[:200])
    (w / "text.jpg").write_text("not an image")
    (w / "empty.png").write_bytes(b"")
    (w / "folder.png").mkdir()
    (w / "bomb.png").write_bytes(png_header(20000, 20000))
    (w / "text.pt").write_text("not a checkpoint")
    (w / "cut.pt").write_bytes((w / "run" / "best.pt").read_bytes()[:1000])
    torch.save({"x": Boom()}, w / "pickle.pt")
    save_checkpoint(
        {"model": {}, "optimizer": {}, "step": 3, "config": {"T": 4}},
        w / "draw_like.pt",
    )
    save_checkpoint(
        {"format": "sat_tutorial.captioner/1", "config": {}}, w / "hollow.pt"
    )
    (w / "afile").write_text("a file where a folder should be")
    (w / "emptyrun").mkdir()
    (w / "nodata").mkdir()
    # a Karpathy file whose images are all val/test: nothing to train on
    d = fake_dataset(w / "notrain", n=10)
    js = json.loads((d / "dataset_flickr8k.json").read_text())
    for im in js["images"]:
        im["split"] = "val" if im["split"] == "train" else im["split"]
    (d / "dataset_flickr8k.json").write_text(json.dumps(js))
    # every training image unreadable (text in .jpg files)
    d = fake_dataset(w / "unreadable", n=10)
    for im in json.loads((d / "dataset_flickr8k.json").read_text())["images"]:
        if im["split"] == "train":
            (d / "images" / im["filename"]).write_text("not a jpeg")
    return w


def snapshot(root: Path) -> dict:
    return {
        p: hashlib.sha1(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file()
    }


def run_case(argv, world, capsys):
    "(exit status, stdout, stderr) of `main(argv)` under the deadline; asserts that no file that was there changed."
    before = snapshot(world)
    capsys.readouterr()
    with deadline(LIMIT_S):
        try:
            code = main([str(a).replace("{w}", str(world)) for a in argv])
        except SystemExit as e:
            code = e.code
    out, err = capsys.readouterr()
    after = snapshot(world)
    changed = [str(p.relative_to(world)) for p in before if after.get(p) != before[p]]
    assert not changed, f"files already on disk changed or vanished: {changed}"
    return code, out, err


def check_one_line(code, out, err, want_code, culprit):
    assert code == want_code, (code, out, err)
    assert "Traceback" not in out + err, err
    lines = [l for l in err.splitlines() if "error:" in l]
    assert len(lines) == 1, err
    assert culprit in lines[0], (culprit, lines[0])


RUN = ["--out", "{w}/fresh"]

# argparse ranges: refused before any work, exit 2, naming the flag
RANGES = {
    "train --batch-size 0": ["train", *RUN, "--batch-size", "0"],
    "train --batch-size -4": ["train", *RUN, "--batch-size", "-4"],
    "train --n-train 0": ["train", *RUN, "--n-train", "0"],
    "train --warmup -5": ["train", *RUN, "--warmup", "-5"],
    "train --max-len 0": ["train", *RUN, "--max-len", "0"],
    "train --lr 0": ["train", *RUN, "--lr", "0"],
    "train --lr nan": ["train", *RUN, "--lr", "nan"],
    "train --dropout 1.5": ["train", *RUN, "--dropout", "1.5"],
    "train --ema 1": ["train", *RUN, "--ema", "1"],
    "train --max-missing 2": ["train", *RUN, "--max-missing", "2"],
    "train --grid 0": ["train", *RUN, "--grid", "0"],
    "train --image-size 10": ["train", *RUN, "--image-size", "10"],
    "train --steps -1": ["train", *RUN, "--steps", "-1"],
    "train --epochs 0": ["train", *RUN, "--epochs", "0"],
    "train --seed -1": ["train", *RUN, "--seed", "-1"],
    "train --val-beam 0": ["train", *RUN, "--val-beam", "0"],
    "train --scst-temperature 0": ["train", *RUN, "--scst-temperature", "0"],
    "train --clip -1": ["train", *RUN, "--clip", "-1"],
    "train --time-budget inf": ["train", *RUN, "--time-budget", "inf"],
    "train --time-budget 1e9": ["train", *RUN, "--time-budget", "1e9"],
    "ram train --time-budget 1e9": ["ram", "train", *RUN, "--time-budget", "1e9"],
    "train --num-workers -1": ["train", *RUN, "--num-workers", "-1"],
    "train --model-kwargs '[1]'": ["train", *RUN, "--model-kwargs", "[1]"],
    "train --model-kwargs '{bad'": ["train", *RUN, "--model-kwargs", "{bad"],
    "train --model bogus": ["train", *RUN, "--model", "bogus"],
    "train --batch-size 1e3": ["train", *RUN, "--batch-size", "1e3"],
    "evaluate --beam-size 0": [
        "evaluate",
        "--checkpoint",
        "{w}/run/best.pt",
        "--beam-size",
        "0",
    ],
    "evaluate --max-len 0": [
        "evaluate",
        "--checkpoint",
        "{w}/run/best.pt",
        "--max-len",
        "0",
    ],
    "evaluate --limit -1": [
        "evaluate",
        "--checkpoint",
        "{w}/run/best.pt",
        "--limit",
        "-1",
    ],
    "evaluate --length-norm -1": [
        "evaluate",
        "--checkpoint",
        "{w}/run/best.pt",
        "--length-norm",
        "-1",
    ],
    "caption --beam-size -2": [
        "caption",
        "--checkpoint",
        "{w}/run/best.pt",
        "{w}/scene.png",
        "--beam-size",
        "-2",
    ],
    "extract-features --grid 0": [
        "extract-features",
        "--data",
        "flickr8k",
        "--out",
        "{w}/f.h5",
        "--grid",
        "0",
    ],
    "extract-features --batch-size 0": [
        "extract-features",
        "--data",
        "flickr8k",
        "--out",
        "{w}/f.h5",
        "--batch-size",
        "0",
    ],
    "extract-features --chunk-size 0": [
        "extract-features",
        "--data",
        "flickr8k",
        "--out",
        "{w}/f.h5",
        "--chunk-size",
        "0",
    ],
    "extract-features --workers -1": [
        "extract-features",
        "--data",
        "flickr8k",
        "--out",
        "{w}/f.h5",
        "--workers",
        "-1",
    ],
    "extract-features --splits train,bogus": [
        "extract-features",
        "--data",
        "flickr8k",
        "--out",
        "{w}/f.h5",
        "--splits",
        "train,bogus",
    ],
    "demo --steps 0": ["demo", "--out", "{w}/demo", "--steps", "0"],
    "demo --minutes 0": ["demo", "--out", "{w}/demo", "--minutes", "0"],
    "demo --n-test 0": ["demo", "--out", "{w}/demo", "--n-test", "0"],
    "draw train --glimpses 0": [
        "draw",
        "train",
        "--out",
        "{w}/draw",
        "--glimpses",
        "0",
    ],
    "draw train --read-n 0": ["draw", "train", "--out", "{w}/draw", "--read-n", "0"],
    "draw train --batch-size 0": [
        "draw",
        "train",
        "--out",
        "{w}/draw",
        "--batch-size",
        "0",
    ],
    "draw train --lr -1": ["draw", "train", "--out", "{w}/draw", "--lr", "-1"],
    "draw sample --n 0": ["draw", "sample", "--checkpoint", "{w}/x.pt", "--n", "0"],
    # upper bounds: a slip of the keyboard is one line, not an allocator's traceback
    "caption --beam-size 1000000": [
        "caption",
        "--checkpoint",
        "{w}/run/best.pt",
        "{w}/scene.png",
        "--beam-size",
        "1000000",
    ],
    "evaluate --max-len 1000000": [
        "evaluate",
        "--checkpoint",
        "{w}/run/best.pt",
        "--max-len",
        "1000000",
    ],
    "train --batch-size 1000000": ["train", *RUN, "--batch-size", "1000000"],
    "train --hidden-dim 1000000": ["train", *RUN, "--hidden-dim", "1000000"],
    "train --val-beam 1000000": ["train", *RUN, "--val-beam", "1000000"],
    "demo --n-train 100000000": ["demo", "--out", "{w}/demo", "--n-train", "100000000"],
    "draw train --hidden 1000000": [
        "draw",
        "train",
        "--out",
        "{w}/draw",
        "--hidden",
        "1000000",
    ],
    "draw train --steps 10**9": [
        "draw",
        "train",
        "--out",
        "{w}/draw",
        "--steps",
        "1000000000",
    ],
    "draw train --glimpses 100000": [
        "draw",
        "train",
        "--out",
        "{w}/draw",
        "--glimpses",
        "100000",
    ],
    "draw sample --n 100000": [
        "draw",
        "sample",
        "--checkpoint",
        "{w}/x.pt",
        "--n",
        "100000",
    ],
    # rates: 1e39 overflows float32 inside Adam
    "train --lr 1e39": ["train", *RUN, "--lr", "1e39"],
    "train --clip 1e39": ["train", *RUN, "--clip", "1e39"],
    "train --scst-temperature 1e39": ["train", *RUN, "--scst-temperature", "1e39"],
    "draw train --lr 1e39": ["draw", "train", "--out", "{w}/draw", "--lr", "1e39"],
    "ocr train --lr 1e39": ["ocr", "train", "--out", "{w}/draw", "--lr", "1e39"],
    "ram train --lr 1e39": ["ram", "train", "--out", "{w}/draw", "--lr", "1e39"],
    "demo --minutes 1e9": ["demo", "--out", "{w}/demo", "--minutes", "1e9"],
}


@pytest.mark.parametrize("argv", list(RANGES.values()), ids=list(RANGES))
def test_numeric_flag_out_of_range(argv, world, capsys):
    flag = argv[-2]
    code, out, err = run_case(argv, world, capsys)
    check_one_line(
        code, out, err, 2, f"argument {flag}" if flag != "--glimpses" else "--glimpses"
    )
    assert (
        not (world / "fresh").exists()
        and not (world / "demo").exists()
        and not (world / "draw").exists()
    )


# expected errors at run time: exit 1, one line naming the file or flag
ERRORS = {
    "train --device bogus": (
        ["train", *RUN, *TINY, "--device", "bogus"],
        "--device 'bogus'",
    ),
    "train --device cuda:7": (
        ["train", *RUN, *TINY, "--device", "cuda:7"],
        "--device 'cuda:7'",
    ),
    "train --model-kwargs unknown option": (
        ["train", *RUN, *TINY, "--model-kwargs", '{"bogus": 1}'],
        "--model-kwargs",
    ),
    "train --model-kwargs alpha_c below 0": (
        ["train", *RUN, *TINY, "--model-kwargs", '{"alpha_c": -5}'],
        "--model-kwargs alpha_c must be a number ≥ 0",
    ),
    "train --init-from text file": (
        ["train", *RUN, *TINY, "--init-from", "{w}/text.pt"],
        "text.pt",
    ),
    "train --data-dir missing": (
        ["train", *RUN, "--data", "flickr8k", "--data-dir", "{w}/nodata"],
        "nodata",
    ),
    "train --features missing": (
        [
            "train",
            *RUN,
            "--data",
            "flickr8k",
            "--data-dir",
            "{w}/unreadable",
            "--features",
            "{w}/none.h5",
        ],
        "none.h5",
    ),
    "train: no train images": (
        ["train", *RUN, "--data", "flickr8k", "--data-dir", "{w}/notrain"],
        "nothing to train on",
    ),
    "train: unreadable images over --max-missing": (
        ["train", *RUN, "--data", "flickr8k", "--data-dir", "{w}/unreadable"],
        "not readable images",
    ),
    "train: every train image unreadable": (
        [
            "train",
            *RUN,
            "--data",
            "flickr8k",
            "--data-dir",
            "{w}/unreadable",
            "--max-missing",
            "1",
        ],
        "nothing to train on",
    ),
    "train --overwrite refused by its data keeps the old run": (
        [
            "train",
            "--out",
            "{w}/run",
            "--overwrite",
            "--data",
            "flickr8k",
            "--data-dir",
            "{w}/notrain",
        ],
        "nothing to train on",
    ),
    "evaluate text checkpoint": (
        ["evaluate", "--checkpoint", "{w}/text.pt"],
        "text.pt could not be loaded",
    ),
    "evaluate truncated checkpoint": (
        ["evaluate", "--checkpoint", "{w}/cut.pt"],
        "cut.pt could not be loaded",
    ),
    "evaluate pickled object": (
        ["evaluate", "--checkpoint", "{w}/pickle.pt"],
        "pickle.pt could not be loaded",
    ),
    "evaluate missing checkpoint": (
        ["evaluate", "--checkpoint", "{w}/none.pt"],
        "none.pt does not exist",
    ),
    "evaluate folder as checkpoint": (
        ["evaluate", "--checkpoint", "{w}/folder.png"],
        "folder.png",
    ),
    "evaluate DRAW checkpoint": (
        ["evaluate", "--checkpoint", "{w}/draw_like.pt"],
        "draw_like.pt is not a sat_tutorial captioner",
    ),
    "evaluate hollow checkpoint": (
        ["evaluate", "--checkpoint", "{w}/hollow.pt"],
        "hollow.pt: not a complete captioner run",
    ),
    "evaluate --json is a folder": (
        ["evaluate", "--checkpoint", "{w}/run/best.pt", "--json", "{w}/folder.png"],
        "--json",
    ),
    "evaluate --device bogus": (
        ["evaluate", "--checkpoint", "{w}/run/best.pt", "--device", "bogus"],
        "--device 'bogus'",
    ),
    "evaluate --reads on soft": (
        ["evaluate", "--checkpoint", "{w}/run/best.pt", "--reads", "marginal"],
        "--reads",
    ),
    "caption DRAW checkpoint": (
        ["caption", "--checkpoint", "{w}/draw_like.pt", "{w}/scene.png"],
        "draw_like.pt",
    ),
    "caption --attention-png is a folder": (
        [
            "caption",
            "--checkpoint",
            "{w}/run/best.pt",
            "{w}/scene.png",
            "--attention-png",
            "{w}/folder.png",
        ],
        "--attention-png",
    ),
    "caption --attention-png under a file": (
        [
            "caption",
            "--checkpoint",
            "{w}/run/best.pt",
            "{w}/scene.png",
            "--attention-png",
            "{w}/afile/a.png",
        ],
        "--attention-png",
    ),
    "extract-features --data-dir missing": (
        [
            "extract-features",
            "--data",
            "flickr8k",
            "--data-dir",
            "{w}/nodata",
            "--out",
            "{w}/f.h5",
        ],
        "nodata",
    ),
    "extract-features --out is a folder": (
        [
            "extract-features",
            "--data",
            "flickr8k",
            "--data-dir",
            "{w}/notrain",
            "--out",
            "{w}/folder.png",
        ],
        "--out",
    ),
    "demo --out is a file": (["demo", "--out", "{w}/afile"], "--out"),
    "demo --device bogus": (
        ["demo", "--out", "{w}/demo", "--device", "bogus"],
        "--device 'bogus'",
    ),
    "draw train --device bogus": (
        ["draw", "train", "--out", "{w}/draw", "--device", "bogus"],
        "--device 'bogus'",
    ),
}


@pytest.mark.parametrize("argv,culprit", list(ERRORS.values()), ids=list(ERRORS))
def test_expected_error_is_one_line(argv, culprit, world, capsys):
    code, out, err = run_case(argv, world, capsys)
    check_one_line(code, out, err, 1, culprit.replace("{w}", str(world)))


# `caption` takes each image on its own: the bad one gets one line, the good one is still captioned, exit status 1
BAD_IMAGES = {
    "missing": "none.png",
    "truncated": "cut.png",
    "not an image": "text.jpg",
    "empty file": "empty.png",
    "a folder": "folder.png",
    "decompression bomb": "bomb.png",
}


@pytest.mark.parametrize("bad", list(BAD_IMAGES.values()), ids=list(BAD_IMAGES))
def test_caption_bad_image_among_good(bad, world, capsys):
    code, out, err = run_case(
        [
            "caption",
            "--checkpoint",
            "{w}/run/best.pt",
            "{w}/scene.png",
            f"{{w}}/{bad}",
            "{w}/scene.png",
            "--device",
            "cpu",
        ],
        world,
        capsys,
    )
    check_one_line(code, out, err, 1, str(world / bad))
    assert out.count(f"{world / 'scene.png'}: ") == 2, (
        out
    )  # the images before and after it
    assert "1 of 3 images could not be captioned" in err


def test_caption_reads_exif_orientation(world, capsys):
    "A scene stored mirrored with EXIF orientation 2 (shown mirrored back) is captioned as the scene itself."
    a = make_scenes(1, seed=5)[0].array
    ex = Image.Exif()
    ex[0x0112] = 2
    Image.fromarray(np.ascontiguousarray(a[:, ::-1])).save(world / "exif.png", exif=ex)
    code, out, err = run_case(
        [
            "caption",
            "--checkpoint",
            "{w}/run/best.pt",
            "{w}/scene.png",
            "{w}/exif.png",
            "--device",
            "cpu",
        ],
        world,
        capsys,
    )
    assert code == 0, err
    (l1, l2) = [
        l.split(": ", 1)[1] for l in out.splitlines() if l.startswith(str(world))
    ]
    assert l1 == l2
    (world / "exif.png").unlink()


# runs already on disk: refused unless --resume or --overwrite; stale checkpoint temp files removed by the next run
def test_train_into_a_run_refuses(world, capsys):
    code, out, err = run_case(["train", "--out", "{w}/run", *TINY], world, capsys)
    check_one_line(code, out, err, 1, f"--out {world / 'run'} already holds a run")
    assert "--resume" in err and "--overwrite" in err


def test_resume_with_no_run_says_so(world, capsys):
    code, out, err = run_case(
        ["train", "--out", "{w}/emptyrun", *TINY, "--resume"], world, capsys
    )
    check_one_line(code, out, err, 1, "holds no run to resume")


def test_resume_and_overwrite_together(world, capsys):
    code, out, err = run_case(
        ["train", "--out", "{w}/run", *TINY, "--resume", "--overwrite"], world, capsys
    )
    check_one_line(code, out, err, 1, "--overwrite")


def test_overwrite_replaces_and_resume_cleans_temp_files(world, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(world / "run", run)
    stale = run / f".last.pt.k1ll9{TEMP_SUFFIX}"
    stale.write_bytes(b"x" * 1000)  # what kill -9 mid-write leaves
    with deadline(LIMIT_S):
        assert (
            main(["train", "--out", str(run), *TINY[:1], "4", *TINY[2:], "--resume"])
            == 0
        )
    assert (
        not stale.exists()
        and torch.load(run / "last.pt", weights_only=True)["step"] == 4
    )
    old = (run / "best.pt").read_bytes()
    with deadline(LIMIT_S):
        assert (
            main(["train", "--out", str(run), *TINY, "--seed", "3", "--overwrite"]) == 0
        )
    assert "--overwrite: deleted the earlier run's" in capsys.readouterr().out
    assert (run / "best.pt").read_bytes() != old and torch.load(
        run / "last.pt", weights_only=True
    )["step"] == 2


def test_debug_shows_the_traceback(world, capsys, monkeypatch):
    code, out, err = run_case(
        ["--debug", "evaluate", "--checkpoint", "{w}/text.pt"], world, capsys
    )
    assert code == 1 and "Traceback" in err and "text.pt could not be loaded" in err
    monkeypatch.setenv("SAT_TUTORIAL_DEBUG", "1")
    code, out, err = run_case(
        ["evaluate", "--checkpoint", "{w}/text.pt"], world, capsys
    )
    assert code == 1 and "Traceback" in err


def test_a_bug_keeps_its_traceback(world, monkeypatch):
    "An unexpected exception is not turned into one line: it propagates (and the interpreter prints its traceback)."
    monkeypatch.setattr(
        "sat_tutorial.training.load_ensemble", lambda *a, **k: {}["a bug"]
    )
    with pytest.raises(KeyError):
        main(["evaluate", "--checkpoint", str(world / "run" / "best.pt")])


def test_demo_cut_short_by_its_time_cap_says_so(tmp_path, capsys):
    "A demo whose --minutes cap stops training early says so (steps done of planned, how to rerun), on the console and in metrics.json."
    with deadline(300):
        assert (
            main(
                [
                    "demo",
                    "--out",
                    str(tmp_path),
                    "--steps",
                    "50",
                    "--minutes",
                    "1e-9",
                    "--n-train",
                    "60",
                    "--n-test",
                    "10",
                    "--device",
                    "cpu",
                ]
            )
            == 0
        )
    err = capsys.readouterr().err
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert (
        m["steps_done"] == 1
        and m["steps_planned"] == 50
        and m["stopped_by_time_cap"] is True
    )
    assert (
        "stopped training after 1 of 50 planned steps" in m["note"]
        and "--minutes" in m["note"]
    )
    assert err.count(m["note"]) == 2  # before the evaluation, and again at the end


def test_blank_tokens_never_become_words(tmp_path):
    'A Karpathy file whose tokens hold "", blanks or two words in one: the blanks are dropped, the pair split; no blank word in the vocabulary.'
    from sat_tutorial.data import Vocab
    from sat_tutorial.karpathy import load_karpathy

    d = fake_dataset(tmp_path, n=5)
    js = json.loads((d / "dataset_flickr8k.json").read_text())
    js["images"][0]["sentences"][0]["tokens"] = ["a", "", " ", "red  dog"]
    (d / "dataset_flickr8k.json").write_text(json.dumps(js))
    recs = load_karpathy(d / "dataset_flickr8k.json", d / "images")
    assert recs[0].captions[0] == ["a", "red", "dog"]
    vocab = Vocab.build((c for r in recs for c in r.captions), min_count=1)
    assert all(w.strip() == w and w for w in vocab.itos)
    js["images"][1]["sentences"][0]["tokens"] = (
        "a red dog"  # a string, not a list of tokens
    )
    (d / "dataset_flickr8k.json").write_text(json.dumps(js))
    with pytest.raises(
        ValueError, match=r"images\[1\] \(001.jpg\): 'tokens' must be a list of strings"
    ):
        load_karpathy(d / "dataset_flickr8k.json", d / "images")


def test_figure_names_are_the_files_written(world, tmp_path, capsys):
    """Issue 59: a figure name without a suffix gets .png, and the line printed names
    that file (it said `wrote runs` and wrote runs.png); a suffix matplotlib cannot
    write is one line naming the flag, before any work. `draw sample` takes a zoo
    model (whose checkpoint records no step)."""
    argv = ["caption", "--checkpoint", str(world / "run" / "best.pt")]
    argv += [str(world / "scene.png"), "--device", "cpu", "--attention-png"]
    with deadline(LIMIT_S):
        assert main([*argv, str(tmp_path / "att")]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "att.png").is_file() and not (tmp_path / "att").exists()
    assert f"attention: {tmp_path / 'att.png'}" in out
    code, out, err = run_case([*argv, "{w}/att.xyz"], world, capsys)
    check_one_line(code, out, err, 1, "--attention-png")
    assert "cannot write .xyz files" in err and not (world / "att.xyz").exists()
    sample = ["draw", "sample", "--checkpoint", "draw-mnist", "--n", "2", "--out"]
    with deadline(LIMIT_S):
        assert main([*sample, str(tmp_path / "runs")]) == 0
    assert f"wrote {tmp_path / 'runs.png'}" in capsys.readouterr().out
    assert (tmp_path / "runs.png").is_file() and not (tmp_path / "runs").exists()
    code, out, err = run_case([*sample, "{w}/s.v2"], world, capsys)
    check_one_line(code, out, err, 1, "--out")
