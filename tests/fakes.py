"""Small fake datasets for the tests: Karpathy-format caption files with tiny images,
and feature files for them."""

import json
from pathlib import Path

import numpy as np
from PIL import Image

from sat_tutorial.karpathy import tokenize
from sat_tutorial.feature_store import FeatureStore

CAPTIONS = [
    ["a red dog runs on grass", "a dog runs"],
    ["a blue cat sits on a mat", "a cat sits"],
    ["two birds fly over water", "birds over the water"],
]


def fake_dataset(
    root: Path, n: int = 40, name: str = "flickr8k", size: int = 32, seed: int = 0
) -> Path:
    """n random images of size×size under root/name/images with a Karpathy split file
    (80% train, 10% val, 10% test)."""
    d = root / name
    (d / "images").mkdir(parents=True)
    rng = np.random.default_rng(seed)
    ims = []
    for i in range(n):
        Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)).save(
            d / "images" / f"{i:03d}.jpg"
        )
        split = "train" if i < 0.8 * n else "val" if i < 0.9 * n else "test"
        ims.append(
            {
                "filename": f"{i:03d}.jpg",
                "split": split,
                "sentences": [
                    {"raw": c, "tokens": tokenize(c)}
                    for c in CAPTIONS[i % len(CAPTIONS)]
                ],
            }
        )
    (d / f"dataset_{name}.json").write_text(json.dumps({"images": ims}))
    return d


def fake_features(
    path: Path, keys, L: int = 4, D: int = 16, seed: int = 0, failed=(), **meta
) -> Path:
    """A complete feature file of random ReLU-like features for `keys`, made (says its
    metadata) by `meta`."""
    rng = np.random.default_rng(seed)
    x = np.maximum(rng.normal(size=(len(keys), L, D)), 0).astype(np.float16)
    bad = np.isin(np.arange(len(keys)), list(failed))
    meta = {
        "backbone": "resnet50",
        "grid": int(L**0.5),
        "dataset": "flickr8k",
        "weights": None,
        **meta,
    }
    FeatureStore.assemble(path, list(keys), L, D, meta, [(0, x, bad)]).close()
    return path


def caption_batch(V: int = 15, B: int = 3, T: int = 6):
    """Padded captions `(B, T)` of lengths T, T − 2, 3 (<start> … <end> <pad>…) with
    random words below V, and the lengths."""
    import torch
    from sat_tutorial.data import Vocab

    torch.manual_seed(0)
    lengths = torch.tensor([T, T - 2, 3])
    caps = torch.randint(4, V, (B, T))
    caps[:, 0] = Vocab.start
    for b, n in enumerate(lengths):
        caps[b, n - 1] = Vocab.end
        caps[b, n:] = Vocab.pad
    return caps, lengths


def minute_clock():
    "A `Clock` subclass on which every step takes one minute."
    from sat_tutorial.learner import Clock

    class _MinutePerStep(Clock):
        def before_fit(self, learn):
            self.learn = learn
            super().before_fit(learn)

        def minutes(self):
            learn = getattr(self, "learn", None)
            return float(learn.step) if learn is not None else self.spent

    return _MinutePerStep


def rate_recorder(lrs: list):
    "A callback appending the learning rate after every step to `lrs`."
    from sat_tutorial.learner import Callback

    class Rates(Callback):
        def after_step(self, learn):
            lrs.append(learn.opt.param_groups[0]["lr"])

    return Rates()


def one_line(capsys, *needles) -> str:
    "The captured stderr: one line, no traceback, holding each of `needles`."
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


BAD_OUTS = ["file", "under_file", "read_only", "a_run"]


def bad_out(tmp_path, monkeypatch, where: str, run_file: str):
    """An --out a training command must refuse before any work (`where`, one of
    BAD_OUTS): a file, a path under a file, a read-only folder, or a folder holding a
    run whose `run_file` reads b"an earlier run". Returns the --out, that earlier run
    file, and what the one-line error must say."""
    import os

    f = tmp_path / "a-file"
    f.write_text("x")
    run = tmp_path / "run"
    run.mkdir()
    (run / run_file).write_bytes(b"an earlier run")
    out = {
        "file": f,
        "under_file": f / "run",
        "read_only": tmp_path / "ro" / "run",
        "a_run": run,
    }[where]
    if where == "read_only":
        (tmp_path / "ro").mkdir()
        real = os.access  # root writes anywhere: the check asks os.access
        monkeypatch.setattr(
            os, "access", lambda p, m: Path(p).name != "ro" and real(p, m)
        )
    why = {"read_only": "is read-only", "a_run": "--overwrite"}.get(where, "is a file")
    return out, run / run_file, why


QUIET = dict(progress=False, log=lambda *a: None)  # fit() without a bar or a log


def tiny_config(**kw):
    "A scenes configuration small enough for a test: 6 steps of an 8-wide captioner."
    from sat_tutorial.training import scenes_config

    base = dict(steps=6, n_train=60, n_val=0, n_test=0, batch_size=16, val_every=0)
    base.update(ckpt_every=0, seed=2, dropout=0.2, warmup=2)
    base.update(embed_dim=8, hidden_dim=8, attention_dim=8, feature_dim=8)
    return scenes_config(**{**base, **kw})
