"""α is treated as scores: the draw is from softmax(α), which flattens the distribution
and draws locations whose α is 0."""


# loses: a2_sample_test
# %% a2_sample
def sample_locations(alpha):
    return torch.multinomial(alpha.detach().softmax(-1), 1).squeeze(1)
