"""ℓ keeps only the REINFORCE and entropy terms: the ∂log p(y|s̃, a)/∂W term of the
learning rule is missing, so the words' own likelihood is never trained."""


# loses: a2_surrogate_test a2_enumeration_test
# %% a2_surrogate
def surrogate(log_py, log_ps, H, b, lambda_r=1.0, lambda_e=0.0):
    return lambda_r * (log_py.detach() - b) * log_ps + lambda_e * H
