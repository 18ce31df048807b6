# %% md
# # A7 — Project: a captioner that looks at the right place
#
# Follows notebooks `02_scenes`, `09_metrics`, `12_training` and `13b_cli`. Train a
# captioner on the package's built-in synthetic scenes with the `sat-tutorial train`
# command and reach **attention correctness ≥ 0.6** on the 1,000 held-out test scenes,
# in **at most 10 minutes of training on a 2-core CPU**. Attention correctness (notebook
# 09) is the attention mass that falls inside the named object's box at the step that
# emits each grounded word, averaged over the words: uniform attention scores below 0.1,
# a map spread evenly over the cells touching the object about 0.7.
#
# You choose the model (`--model soft | hard | adaptive | butd`) and its options; read
# the notebooks for what each model needs to learn to look in a few minutes. Options
# left out take the scenes preset (`sat-tutorial train --help` lists them with their
# defaults). Keep the default test split (`--n-test 1000`) and give the run a time
# budget (`--time-budget MINUTES`, at most 10).
#
# **How this is graded.** Running this notebook trains once (about as long as your time
# budget, plus a minute or two for the data and the evaluation) and writes the run's
# folder `a7_run/`: `config.json`, `train_summary.json`, `test_metrics.json` and the
# checkpoint `best.pt`. Submit the folder with the notebook. The grader **does not
# train** and does not trust the JSON files: it loads `a7_run/best.pt` in a sandbox,
# captions fresh scenes it draws itself (not the test split) and measures attention
# correctness; the JSON files must agree with the checkpoint. To train again, delete
# `a7_run/` first. 10 points: 3 for `run_summary`, 2 for a run that follows the rules, 5
# for reaching the target. What it cannot check: how long a checkpoint really trained
# (it reads the checkpoint's own configuration), so the 10-minute rule stays a rule you
# keep.
#
# **What you may use.** The package's command line (`sat-tutorial train`) and its
# options for the run; the standard library (`json`, `pathlib`) for `run_summary`, which
# you write yourself. Copying code from the package or from anyone else into an answer
# is not allowed. This assignment grades a run, not a piece of the package, so no part
# of the package is taken out while it is graded; the grader still evaluates the
# checkpoint itself, in a sandbox with none of your code.

# %%
import json, os, subprocess, sys, tempfile
from pathlib import Path

RUN_DIR = Path("a7_run")
TARGET = 0.6  # attention correctness on the test scenes
MAX_MINUTES = 10.0  # of training

# %% md
# ## 1. Your run


# %% solution id=a7_command
def train_args():
    """The arguments of `sat-tutorial train` for your run (everything but --out and
    --evaluate)."""
    ### BEGIN SOLUTION
    return ["--model", "butd", "--data", "scenes", "--time-budget", "9"]
    ### END SOLUTION


# %%
if (RUN_DIR / "test_metrics.json").exists():
    print(
        f"{RUN_DIR} holds a finished run: not training again (delete the folder to "
        "train again)"
    )
elif os.environ.get("NBGRADER_EXECUTION"):
    print(
        f"no {RUN_DIR}/test_metrics.json in this submission: there is no run to grade"
    )
else:
    cmd = [
        sys.executable,
        "-m",
        "sat_tutorial",
        "train",
        *train_args(),
        "--out",
        str(RUN_DIR),
        "--evaluate",
    ]
    print(" ".join(cmd[1:]))
    subprocess.run(cmd, check=True)

# %% md
# ## 2. Read the run (3 points)
#
# Write `run_summary(run_dir)`: a dict with `model`, `data`, `n_test` (from
# `config.json`), `steps`, `minutes` (from `train_summary.json`), and `bleu4`,
# `attention_correctness` (from `test_metrics.json`). A missing file must raise
# `FileNotFoundError` (naming it).


# %% solution id=a7_summary
def run_summary(run_dir):
    "The facts of a training run folder that the grade depends on, as a dict."
    ### BEGIN SOLUTION
    run_dir = Path(run_dir)

    def read(name):
        return json.loads((run_dir / name).read_text())

    cfg, summary, metrics = (
        read("config.json"),
        read("train_summary.json"),
        read("test_metrics.json"),
    )
    return {
        "model": cfg["model"],
        "data": cfg["data"],
        "n_test": cfg["n_test"],
        "steps": summary["steps"],
        "minutes": summary["minutes"],
        "bleu4": metrics["bleu4"],
        "attention_correctness": metrics["attention_correctness"],
    }
    ### END SOLUTION


# %% test id=a7_summary_test points=3
summary = run_summary(RUN_DIR) if RUN_DIR.exists() else None
print(summary)
with tempfile.TemporaryDirectory() as tmp:
    (Path(tmp) / "config.json").write_text(
        json.dumps({"model": "soft", "data": "scenes", "n_test": 5, "steps": 0})
    )
    (Path(tmp) / "train_summary.json").write_text(
        json.dumps({"steps": 7, "minutes": 0.5, "best": {"bleu4": 1.0}})
    )
    try:
        run_summary(tmp)
    except FileNotFoundError as e:
        assert "test_metrics.json" in str(e), (
            f"the error should name the missing file: {e}"
        )
    except Exception as e:
        raise AssertionError(
            f"run_summary raised {type(e).__name__} when test_metrics.json is missing: "
            "let the FileNotFoundError through (it names the file)"
        ) from e
    else:
        raise AssertionError(
            "run_summary must raise FileNotFoundError when test_metrics.json is "
            "missing "
            "(do not swallow it)"
        )
    (Path(tmp) / "test_metrics.json").write_text(
        json.dumps({"bleu4": 2.0, "attention_correctness": 0.3})
    )
    got = run_summary(tmp)
    assert got.get("steps") == 7, (
        "steps come from train_summary.json (config.json's `steps` is a cap, 0 when "
        f"training by time): got {got.get('steps')!r}"
    )
    assert got.get("bleu4") == 2.0, (
        "bleu4 comes from test_metrics.json (not the validation's best): "
        f"got {got.get('bleu4')!r}"
    )
    expected = {
        "model": "soft",
        "data": "scenes",
        "n_test": 5,
        "steps": 7,
        "minutes": 0.5,
        "bleu4": 2.0,
        "attention_correctness": 0.3,
    }
    for key, value in expected.items():
        assert got.get(key) == value, (
            f"run_summary(...)[{key!r}] is {got.get(key)!r}, but the run's files say "
            f"{value!r} (model, data, n_test from config.json; steps, minutes from "
            "train_summary.json; bleu4, attention_correctness from test_metrics.json)"
        )


# %% check id=a7_summary_test
KEYS = ("model", "data", "n_test", "steps", "minutes", "bleu4", "attention_correctness")


def calls():
    """A run folder with the three JSON files (values drawn from the grading seed), and
    one without test_metrics.json, written in the sandbox; run_summary on each."""
    import json

    seed_everything(71)
    n = torch.randint(100, 2000, (4,)).tolist()
    u = torch.rand(6).tolist()
    run = {
        "config.json": {
            "model": ["soft", "hard", "butd"][n[0] % 3],
            "data": "scenes",
            "n_test": n[1],
            "n_val": n[2],
            "steps": 0,
        },
        "train_summary.json": {
            "steps": n[3],
            "minutes": round(1 + 9 * u[0], 2),
            "best": round(500 * u[1], 1),
        },
        "test_metrics.json": {
            "bleu1": round(100 * u[2], 2),
            "bleu4": round(100 * u[3], 2),
            "cider": round(600 * u[4], 1),
            "attention_correctness": round(u[5], 3),
        },
    }
    texts = {name: json.dumps(content) for name, content in run.items()}
    del_metrics = {k: v for k, v in texts.items() if k != "test_metrics.json"}
    return [
        files(texts),
        call("run_summary", ref(0)),
        files(del_metrics),
        call("run_summary", ref(2), catch=True),
    ]


def outputs(results):
    got, missing = results[1], results[3]
    if missing[0] == "returned":
        missing = "raises nothing"
    elif missing[1] != "FileNotFoundError":
        missing = f"raises {missing[1]}"
    else:  # the first line of its message
        named = "test_metrics.json" in missing[2]
        missing = "raises FileNotFoundError naming it" if named else missing[2]
    if isinstance(got, dict):
        got = {k: got.get(k) for k in KEYS}
    return {"run_summary(...)": got, "a missing test_metrics.json": missing}


# %% md
# ## 3. The rules (2 points) and the target (5 points)
#
# The grader loads `a7_run/best.pt` itself: the checkpoint must be trained on the scenes
# with a time budget of at most 10 minutes, and `config.json`, `train_summary.json` must
# agree with it (2 points). Then it captions 200 fresh scenes with the checkpoint:
# attention correctness ≥ 0.6 there, and `test_metrics.json` within 0.1 of it (5
# points).

# %% test id=a7_rules_test points=2
for name in ("config.json", "train_summary.json", "test_metrics.json", "best.pt"):
    assert (RUN_DIR / name).exists(), (
        f"{RUN_DIR / name} is missing: run the notebook (it trains) and submit "
        f"{RUN_DIR}/ with it"
    )
_cfg = json.loads((RUN_DIR / "config.json").read_text())
assert _cfg["data"] == "scenes", f"train on the built-in scenes, not {_cfg['data']!r}"
assert 0 < (_cfg.get("time_budget") or 0) <= MAX_MINUTES, (
    f"give the run a time budget of at most {MAX_MINUTES:g} minutes (--time-budget)"
)

# %% check id=a7_rules_test alone
N_SCENES = 200


def evaluate_run():
    "The run's JSON files, its checkpoint's configuration and the checkpoint's metrics."
    import dataclasses
    import json
    from pathlib import Path

    run = Path("a7_run")
    out = {}
    for name in ("config.json", "train_summary.json", "test_metrics.json"):
        try:
            out[name] = json.loads((run / name).read_text())
        except (OSError, ValueError) as e:
            out[name] = f"unreadable: {type(e).__name__}"
    if not (run / "best.pt").is_file():
        out["error"] = "a7_run/best.pt is missing: submit the run's checkpoint"
        return out
    from sat_tutorial.scenes import make_scenes
    from sat_tutorial.training import evaluate, load_ensemble, transform_for

    try:
        enc, model, vocab, cfg = load_ensemble([run / "best.pt"], "cpu").model
    except Exception as e:
        out["error"] = f"a7_run/best.pt does not load ({type(e).__name__})"
        return out
    out["checkpoint config"] = {
        k: v
        for k, v in dataclasses.asdict(cfg).items()
        if isinstance(v, (str, int, float, bool, type(None)))
    }
    if cfg.data != "scenes":
        out["error"] = "the checkpoint was not trained on the scenes"
        return out
    seed = fresh_seed(9_001) * 10 + 3  # from the grading seed; no split's ends in 3
    recs = make_scenes(N_SCENES, seed, "test")
    if cfg.encoder == "scene_regions":
        from sat_tutorial.butd import add_scene_regions

        recs = add_scene_regions(recs, seed=seed)
    model.eval()
    with torch.no_grad():
        metrics, _ = evaluate(
            enc, model, recs, transform_for(cfg), vocab, 1, 20, "cpu", meteor=False
        )
    out["measured"] = {
        k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))
    }
    return out


def probe():
    shared["a7_run"] = evaluate_run()
    return shared["a7_run"]


def rules(run):
    "None when the run follows the rules and its files agree with its checkpoint."
    if "error" in run:
        return first_line(run["error"])
    cfg, ckpt, summary = (
        run["config.json"],
        run["checkpoint config"],
        run["train_summary.json"],
    )
    if not isinstance(cfg, dict) or not isinstance(summary, dict):
        return "config.json or train_summary.json is missing or unreadable"
    budget = ckpt.get("time_budget") or 0
    if not 0 < budget <= 10.0:
        return (
            f"the checkpoint's time budget is {shown(budget)} minutes, not in (0, 10]"
        )
    for k in ("model", "data", "time_budget", "seed", "hidden_dim"):
        if cfg.get(k) != ckpt.get(k):
            return (
                f"config.json and the checkpoint disagree on {k}: {shown(cfg.get(k))} "
                f"against {shown(ckpt.get(k))}"
            )
    if (
        not isinstance(summary.get("minutes"), (int, float))
        or summary["minutes"] > budget + 1
    ):
        minutes = summary.get("minutes")
        return (
            f"train_summary.json: the run took {shown(minutes)} minutes, over its "
            "budget"
        )
    return None


def compare(got, want):
    why = rules(got)
    if why:
        raise Mismatch(why)


# %% test id=a7_target_test points=5
print(
    "attention correctness",
    json.loads((RUN_DIR / "test_metrics.json").read_text())["attention_correctness"],
    f"(target {TARGET})",
)

# %% check id=a7_target_test alone
TARGET = 0.6


def probe():
    "The evaluation a7_rules_test's probe made (the probes run in one process)."
    if "a7_run" not in shared:
        raise RuntimeError("the run was not evaluated (a7_rules_test's probe failed)")
    return shared["a7_run"]


def rules(run):
    "None when the run follows the rules and its files agree with its checkpoint."
    if "error" in run:
        return first_line(run["error"])
    cfg, ckpt, summary = (
        run["config.json"],
        run["checkpoint config"],
        run["train_summary.json"],
    )
    if not isinstance(cfg, dict) or not isinstance(summary, dict):
        return "config.json or train_summary.json is missing or unreadable"
    budget = ckpt.get("time_budget") or 0
    if not 0 < budget <= 10.0:
        return (
            f"the checkpoint's time budget is {shown(budget)} minutes, not in (0, 10]"
        )
    for k in ("model", "data", "time_budget", "seed", "hidden_dim"):
        if cfg.get(k) != ckpt.get(k):
            return (
                f"config.json and the checkpoint disagree on {k}: {shown(cfg.get(k))} "
                f"against {shown(ckpt.get(k))}"
            )
    if (
        not isinstance(summary.get("minutes"), (int, float))
        or summary["minutes"] > budget + 1
    ):
        minutes = summary.get("minutes")
        return (
            f"train_summary.json: the run took {shown(minutes)} minutes, over its "
            "budget"
        )
    return None


def compare(got, want):
    why = rules(got)
    if why:
        raise Mismatch(f"the run does not count: {why}")
    measured = got["measured"].get("attention_correctness", float("nan"))
    if measured != measured:
        raise Mismatch("none of the checkpoint's captions names an object (NaN)")
    claimed = got["test_metrics.json"]
    claimed = (
        claimed.get("attention_correctness") if isinstance(claimed, dict) else None
    )
    if not isinstance(claimed, (int, float)) or abs(claimed - measured) > 0.1:
        raise Mismatch(
            f"test_metrics.json says attention correctness {shown(claimed)}, but the "
            f"checkpoint scores {measured:.3f} on the grader's scenes"
        )
    if measured < TARGET:
        raise Mismatch(
            f"attention correctness {measured:.3f} on the grader's scenes is below "
            f"the target {TARGET}"
        )
