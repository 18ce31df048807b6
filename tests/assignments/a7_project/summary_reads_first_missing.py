"""run_summary checks only that the folder exists and turns every other problem into a
ValueError, so a missing test_metrics.json is reported as a bad folder, not named; the
run submitted with it is the short run."""


# run: short_run
# loses: a7_summary_test a7_target_test
# %% a7_summary
def run_summary(run_dir):
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(run_dir)
    try:
        cfg, summary, metrics = (
            json.loads((run_dir / n).read_text())
            for n in ("config.json", "train_summary.json", "test_metrics.json")
        )
    except OSError as e:
        raise ValueError(f"{run_dir} is not a finished run") from e
    return {
        "model": cfg["model"],
        "data": cfg["data"],
        "n_test": cfg["n_test"],
        "steps": summary["steps"],
        "minutes": summary["minutes"],
        "bleu4": metrics["bleu4"],
        "attention_correctness": metrics["attention_correctness"],
    }
