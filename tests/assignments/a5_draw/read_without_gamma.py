"""The read forgets the intensity γ: F_Y x F_Xᵀ."""


# loses: a5_read_test
# %% a5_readwrite
def read(x, F_X, F_Y, gamma):
    return F_Y @ x @ F_X.transpose(-1, -2)


def write(w, F_X, F_Y, gamma):
    return (F_Y.transpose(-1, -2) @ w @ F_X) / gamma[:, None, None]
