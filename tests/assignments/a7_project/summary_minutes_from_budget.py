"""run_summary reports the time budget from config.json as the minutes the run took,
instead of train_summary.json's `minutes`; the run submitted with it is the short
run."""


# run: short_run
# loses: a7_summary_test a7_target_test
# %% a7_summary
def run_summary(run_dir):
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
        "minutes": cfg.get("time_budget"),
        "bleu4": metrics["bleu4"],
        "attention_correctness": metrics["attention_correctness"],
    }
