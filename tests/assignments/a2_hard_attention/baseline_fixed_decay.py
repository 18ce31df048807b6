"""The update hard-codes 0.9 and 0.1 and ignores its `decay` argument."""


# loses: a2_baseline_test
# %% a2_baseline
def update_baseline(b_prev, k, reward, decay=0.9):
    return float(reward) if k == 1 else 0.9 * b_prev + 0.1 * float(reward)
