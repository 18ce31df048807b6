# %% md
# # A7 — Project: a captioner that looks at the right place
#
# Follows notebooks `02_scenes`, `09_metrics`, `12_training` and `13b_cli`. Train a captioner on the package's built-in
# synthetic scenes with the `sat-tutorial train` command and reach **attention correctness ≥ 0.6** on the 1,000
# held-out test scenes, in **at most 10 minutes of training on a 2-core CPU**. Attention correctness (notebook 09) is
# the attention mass that falls inside the named object's box at the step that emits each grounded word, averaged
# over the words: uniform attention scores below 0.1, a map spread evenly over the cells touching the object about 0.7.
#
# You choose the model (`--model soft | hard | adaptive | butd`) and its options; read the notebooks for what each
# model needs to learn to look in a few minutes. Options left out take the scenes preset (`sat-tutorial train --help`
# lists them with their defaults). Keep the default test split (`--n-test 1000`) and give the run a time budget
# (`--time-budget MINUTES`, at most 10).
#
# **How this is graded.** Running this notebook trains once (about as long as your time budget, plus a minute or two
# for the data and the evaluation) and writes the run's folder `a7_run/`: `config.json`, `train_summary.json` and
# `test_metrics.json`. Submit the folder with the notebook. The grader **does not train**: it reads those files. To
# train again, delete `a7_run/` first. 10 points: 3 for `run_summary`, 2 for a run that follows the rules, 5 for
# reaching the target.

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
    "The arguments of `sat-tutorial train` for your run (everything but --out and --evaluate)."
    ### BEGIN SOLUTION
    return ["--model", "butd", "--data", "scenes", "--time-budget", "9"]
    ### END SOLUTION


# %%
if (RUN_DIR / "test_metrics.json").exists():
    print(
        f"{RUN_DIR} holds a finished run: not training again (delete the folder to train again)"
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
# Write `run_summary(run_dir)`: a dict with
# `model`, `data`, `n_test` (from `config.json`), `steps`, `minutes` (from `train_summary.json`), and `bleu4`,
# `attention_correctness` (from `test_metrics.json`). A missing file must raise `FileNotFoundError` (naming it).


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
### BEGIN HIDDEN TESTS
with tempfile.TemporaryDirectory() as tmp:
    fake = Path(tmp)
    (fake / "config.json").write_text(
        json.dumps(
            {
                "model": "soft",
                "data": "scenes",
                "n_test": 1000,
                "n_val": 200,
                "steps": 0,
            }
        )
    )
    (fake / "train_summary.json").write_text(
        json.dumps({"steps": 812, "minutes": 9.5, "best": 401.2})
    )
    (fake / "test_metrics.json").write_text(
        json.dumps(
            {
                "bleu1": 95.0,
                "bleu4": 88.5,
                "cider": 510.0,
                "attention_correctness": 0.61,
            }
        )
    )
    got = run_summary(fake)
    want = {
        "model": "soft",
        "data": "scenes",
        "n_test": 1000,
        "steps": 812,
        "minutes": 9.5,
        "bleu4": 88.5,
        "attention_correctness": 0.61,
    }
    for k, v in want.items():
        assert got.get(k) == v, (
            f"run_summary(...)[{k!r}] should be {v!r} (from the run's JSON files), got {got.get(k)!r}"
        )
    (fake / "test_metrics.json").unlink()
    try:
        run_summary(fake)
    except FileNotFoundError as e:
        assert "test_metrics.json" in str(e), (
            f"the error should name the missing file: {e}"
        )
    else:
        raise AssertionError(
            "run_summary should raise FileNotFoundError when test_metrics.json is missing"
        )
### END HIDDEN TESTS

# %% md
# ## 3. The rules (2 points) and the target (5 points)
#
# The hidden tests read the run's files themselves: the scenes data, the default 1,000 test scenes, at most
# 10 minutes of training, and the test metrics written by `--evaluate`; then attention correctness ≥ 0.6.

# %% test id=a7_rules_test points=2
for name in ("config.json", "train_summary.json", "test_metrics.json"):
    assert (RUN_DIR / name).exists(), (
        f"{RUN_DIR / name} is missing: run the notebook (it trains) and submit {RUN_DIR}/ with it"
    )
### BEGIN HIDDEN TESTS
_cfg = json.loads((RUN_DIR / "config.json").read_text())
_sum = json.loads((RUN_DIR / "train_summary.json").read_text())
_met = json.loads((RUN_DIR / "test_metrics.json").read_text())
assert _cfg["data"] == "scenes", (
    f"the run must train on the built-in scenes, not {_cfg['data']!r}"
)
assert _cfg["n_test"] >= 1000, (
    f"evaluate on the default 1,000 test scenes, not {_cfg['n_test']}"
)
assert 0 < _cfg["time_budget"] <= MAX_MINUTES, (
    f"give the run a time budget of at most {MAX_MINUTES:g} minutes (--time-budget), not {_cfg['time_budget']}"
)
# training stops at the first step that ends past the budget, then validates once and saves: a minute for those
# (a run resumed to train on past its budget fails here: its minutes add up)
assert _sum["minutes"] <= _cfg["time_budget"] + 1.0, (
    f"the run took {_sum['minutes']:.1f} minutes, more than its budget of {_cfg['time_budget']:g} and a final validation"
)
assert "attention_correctness" in _met, "test_metrics.json has no attention correctness"
### END HIDDEN TESTS

# %% test id=a7_target_test points=5
print(
    f"attention correctness {json.loads((RUN_DIR / 'test_metrics.json').read_text()).get('attention_correctness')} (target {TARGET})"
)
### BEGIN HIDDEN TESTS
_met = json.loads((RUN_DIR / "test_metrics.json").read_text())
_cfg = json.loads((RUN_DIR / "config.json").read_text())
assert _cfg["data"] == "scenes" and _cfg["n_test"] >= 1000, (
    "the target counts only on the 1,000 test scenes"
)
_ac = _met["attention_correctness"]
assert _ac == _ac, (
    "attention correctness is undefined (NaN): none of the test captions named an object"
)
assert _ac >= TARGET, f"attention correctness {_ac:.3f} is below the target {TARGET}"
### END HIDDEN TESTS
