"""run_summary takes the step count from config.json (its `steps` cap, 0 when training
by time) and BLEU-4 from the validation's best score, and swallows a missing file; the
run itself is the same short run."""


# run: short_run
# loses: a7_summary_test a7_target_test
# %% a7_summary
def run_summary(run_dir):
    run_dir = Path(run_dir)

    def read(name):
        try:
            return json.loads((run_dir / name).read_text())
        except FileNotFoundError:
            return {}

    cfg, summary, metrics = (
        read("config.json"),
        read("train_summary.json"),
        read("test_metrics.json"),
    )
    return {
        "model": cfg.get("model"),
        "data": cfg.get("data"),
        "n_test": cfg.get("n_test"),
        "steps": cfg.get("steps"),
        "minutes": summary.get("minutes"),
        "bleu4": summary.get("best"),
        "attention_correctness": metrics.get("attention_correctness"),
    }
