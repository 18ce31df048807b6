"""The gate β_t = tanh(f_β(h_{t−1})) instead of the sigmoid: right when the gate is wide
open, 0 instead of 1/2 in the middle and negative below."""


# loses: a1_beta_test
# %% a1_beta
def gated_context(f_beta, h, z):
    return torch.tanh(f_beta(h)) * z
