"""The entropy term enters with a minus sign: ℓ is maximised, so −λ_e H penalises
entropy instead of rewarding it."""


# loses: a2_surrogate_test
# %% a2_surrogate
def surrogate(log_py, log_ps, H, b, lambda_r=1.0, lambda_e=0.0):
    return log_py + lambda_r * (log_py.detach() - b) * log_ps - lambda_e * H
