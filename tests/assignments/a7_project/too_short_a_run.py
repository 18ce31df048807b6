"""A genuine run that follows the rules but trains far too briefly (40 steps) to learn
where to look."""
# run: short_run
# loses: a7_target_test
