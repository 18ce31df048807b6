"""The reward log p(y|s̃) is not detached in the REINFORCE term: autograd then also
differentiates the reward, adding λ_r log p(s̃|a) ∂log p(y|s̃)/∂W, and the estimator is
biased."""


# loses: a2_surrogate_test a2_enumeration_test
# %% a2_surrogate
def surrogate(log_py, log_ps, H, b, lambda_r=1.0, lambda_e=0.0):
    return log_py + lambda_r * (log_py - b) * log_ps + lambda_e * H
