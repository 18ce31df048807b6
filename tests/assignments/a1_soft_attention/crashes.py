"""A cell that crashes the interpreter (a segmentation fault): only its part is lost."""

# loses: a1_beta_test
# %% a1_beta
import ctypes

ctypes.string_at(0)
