"""bench/bench_flickr8k.py select on a tiny hard-attention run of a fake Flickr8k: it
picks the checkpoint and the reading on val alone, never an expected read, and what it
reports on test is that pair's test score."""

import json, sys
from pathlib import Path

import pytest

from fakes import fake_dataset, fake_features
from sat_tutorial.fit import fit
from sat_tutorial.training import TrainConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
bench = pytest.importorskip("bench_flickr8k")


def test_select_picks_on_val_and_tests_only_that_pair(tmp_path, monkeypatch):
    # select decodes 13 times, and METEOR starts a Java process each time (5-40 s): here
    # a stand-in that depends on the
    # captions (their mean length in words) takes its place; what is under test is the
    # choice, not METEOR (test_metrics.py)
    import sat_tutorial.metrics as metrics

    monkeypatch.setattr(
        metrics,
        "_meteor",
        lambda gts, res: sum(len(v[0].split()) for v in res.values()) / len(res),
    )
    fake_dataset(tmp_path, 40)
    monkeypatch.setenv("SAT_TUTORIAL_DATA", str(tmp_path))
    feats = fake_features(tmp_path / "feats.h5", [f"{i:03d}.jpg" for i in range(40)])
    cfg = TrainConfig(
        model="hard",
        data="flickr8k",
        features=str(feats),
        encoder="resnet50",
        grid=2,
        embed_dim=8,
        hidden_dim=8,
        attention_dim=8,
        dropout=0.2,
        batch_size=8,
        steps=40,
        warmup=2,
        lr=1e-2,
        min_count=1,
        val_every=10,
        ckpt_every=10,
        keep_validated=True,
        seed=1,
        model_kwargs={"lambda_r": 0.1, "expected_warmup": 10, "credit": "reward_to_go"},
    )
    run = tmp_path / "flickr8k_hard_run"
    fit(cfg, run, progress=False, log=lambda *a: None)
    assert sorted(p.name for p in run.glob("val_step*.pt")) == [
        f"val_step{k}.pt" for k in (10, 20, 30, 40)
    ]
    bench.main(
        [
            "select",
            "--run",
            str(run),
            "--device",
            "cpu",
            "--out",
            str(tmp_path / "sel.json"),
        ]
    )  # by default every checkpoint
    res = json.loads((tmp_path / "sel.json").read_text())
    steps = sorted({r["step"] for r in res["candidates"]})
    assert steps == [20, 30, 40]  # every one after the Σ α a warm-up, none from it
    assert sorted(r["reads"] for r in res["candidates"]) == sorted(
        ["argmax", "marginal", "expected"] * 3
    )
    crit = lambda r: r["val_beam3"]["bleu4"] + r["val_beam3"]["meteor"]
    assert (
        len({crit(r) for r in res["candidates"]}) > 1
    )  # the candidates differ on val: the choice is a real one
    best = max(crit(r) for r in res["candidates"] if r["reads"] != "expected")
    pick = res["selected"]
    assert pick["reads"] in ("argmax", "marginal") and crit(pick) == best
    # the test row is the selected checkpoint decoded on test under the selected reading
    m, caps, _ = bench.score(
        run / f"val_step{pick['step']}.pt",
        pick["reads"],
        bench.records(0),
        "test",
        "cpu",
    )
    same = ("bleu4", "meteor", "cider", "bleu_length_ratio", "bleu_bp")
    assert {k: m[k] for k in same} == {k: res["test_beam3_selected"][k] for k in same}
    # with BLEU's length terms of those captions (the paper's BLEU has no brevity
    # penalty: equal where bp = 1)
    from sat_tutorial.metrics import bleu_brevity

    bb = bleu_brevity({r.filename: r.raw for r in bench.records(0)["test"]}, caps)
    assert (m["bleu_length_ratio"], m["bleu_bp"]) == (bb["ratio"], bb["bp"]) and (
        bb["bp"] == 1.0
    ) == (bb["ratio"] >= 1)
    assert set(res["test_beam3_best_pt"]) == {"argmax", "marginal", "expected"}
    with pytest.raises(SystemExit, match="--candidates -1"):
        bench.main(
            ["select", "--run", str(run), "--candidates", "-1", "--device", "cpu"]
        )
    with pytest.raises(SystemExit, match="--criterion 'bleu5'"):
        bench.main(
            ["select", "--run", str(run), "--criterion", "bleu5", "--device", "cpu"]
        )
    # what quality records as the run's configuration: the one fit trained with (D from
    # the stored features, 16 here, not
    # TrainConfig's scene default 128), without the fields only the scenes read
    rc = bench.run_config(run / "best.pt")
    assert (
        rc["feature_dim"] == 16 != TrainConfig.feature_dim
        and rc["hidden_dim"] == 8
        and not set(bench.SCENES_ONLY) & set(rc)
    )
    # ensemble: each member at its own val pick; a run with itself scores what the run
    # scores alone, on val and on test
    bench.main(
        [
            "ensemble",
            "--runs",
            str(tmp_path / "sel.json"),
            str(tmp_path / "sel.json"),
            "--device",
            "cpu",
            "--out",
            str(tmp_path / "ens.json"),
        ]
    )
    ens = json.loads((tmp_path / "ens.json").read_text())
    assert [(m["checkpoint"], m["reads"]) for m in ens["members"]] == [
        (str(run / f"val_step{pick['step']}.pt"), pick["reads"])
    ] * 2
    for split, alone in (
        ("val", pick["val_beam3"]),
        ("test", res["test_beam3_selected"]),
    ):
        assert {k: ens[f"{split}_beam3"][k] for k in same} == {
            k: alone[k] for k in same
        }, split
    with pytest.raises(SystemExit):
        bench.main(["ensemble", "--runs", str(run), "--device", "cpu"])
    with pytest.raises(SystemExit, match="select --run"):
        bench.main(
            [
                "ensemble",
                "--runs",
                str(run),
                str(tmp_path / "nowhere_run"),
                "--device",
                "cpu",
            ]
        )
