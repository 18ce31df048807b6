"""Cheat: the genuine short run's checkpoint, with test_metrics.json edited to claim
attention correctness 0.75."""


# run: forged_run
# loses: a7_target_test
# says: checkpoint scores
