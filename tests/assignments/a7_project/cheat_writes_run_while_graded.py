"""Cheat: no run submitted; the notebook writes a7_run/ with perfect JSON files while it
is being graded."""

# loses: a7_rules_test a7_target_test
# says: best.pt is missing
# %% a7_command
import json
from pathlib import Path

run = Path("a7_run")
run.mkdir(exist_ok=True)
(run / "config.json").write_text(
    json.dumps({"model": "butd", "data": "scenes", "n_test": 1000, "time_budget": 9.0})
)
(run / "train_summary.json").write_text(json.dumps({"steps": 600, "minutes": 9.0}))
(run / "test_metrics.json").write_text(
    json.dumps({"bleu4": 80.0, "attention_correctness": 0.9})
)


def train_args():
    return ["--model", "butd", "--data", "scenes", "--time-budget", "9"]
