import math
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from sat_tutorial.core import load_checkpoint, save_checkpoint
from sat_tutorial.training import EpochSampler, TrainConfig, fit, load_captioner, lr_factor, scenes_config

QUIET = dict(progress=False, log=lambda *a: None)


def tiny(**kw):
    return scenes_config(**{**dict(steps=6, n_train=60, n_val=0, n_test=0, batch_size=16, val_every=0, ckpt_every=0, seed=2,
                                   embed_dim=8, hidden_dim=8, attention_dim=8, feature_dim=8, dropout=0.2, warmup=2), **kw})


def test_exact_resume(tmp_path):
    cfg = tiny()
    fit(cfg, tmp_path / "a", **QUIET)
    fit(cfg, tmp_path / "b", stop_at=3, **QUIET)
    assert load_checkpoint(tmp_path / "b" / "last.pt")["step"] == 3
    fit(cfg, tmp_path / "b", resume=True, **QUIET)
    a, b = load_checkpoint(tmp_path / "a" / "last.pt"), load_checkpoint(tmp_path / "b" / "last.pt")
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert a["optimizer"]["state"][0]["exp_avg"].equal(b["optimizer"]["state"][0]["exp_avg"])


def test_refuses_other_model_and_garbage(tmp_path):
    fit(tiny(), tmp_path, stop_at=1, **QUIET)
    with pytest.raises(ValueError, match="trained with hidden_dim=8, but this run has hidden_dim=16"):
        fit(tiny(hidden_dim=16), tmp_path, resume=True, **QUIET)
    save_checkpoint({"hello": 1}, tmp_path / "x.pt")
    with pytest.raises(ValueError, match="not a sat_tutorial captioner checkpoint"):
        load_captioner(tmp_path / "x.pt")


def test_checkpoint_roundtrip_gives_same_model(tmp_path):
    cfg = tiny()
    fit(cfg, tmp_path, **QUIET)
    enc, model, vocab, cfg2 = load_captioner(tmp_path / "last.pt")
    assert cfg2 == cfg and len(vocab) > 10
    ck = load_checkpoint(tmp_path / "last.pt")
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in ck["model"].items())


def test_config_and_schedule():
    with pytest.raises(ValueError, match="unknown configuration keys"):
        TrainConfig.from_dict({**asdict(TrainConfig()), "colour": 1})
    assert lr_factor(0, 10, 100) == pytest.approx(0.1)
    assert lr_factor(9, 10, 100) == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi * 0.09)))
    assert lr_factor(100, 10, 100) == pytest.approx(0.1)
    assert sorted(EpochSampler(7, 1, 3)) == list(range(7))
