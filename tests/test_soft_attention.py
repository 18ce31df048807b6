import torch
import pytest

from sat_tutorial.data import Vocab
from sat_tutorial.soft_attention import (
    SoftAttentionCaptioner,
    caption_nll,
    doubly_stochastic_penalty,
    target_mask,
)
from fakes import caption_batch


def test_masks_and_penalty():
    caps, lengths = caption_batch()
    mask = target_mask(caps, lengths)
    assert mask.sum(1).tolist() == (lengths - 1).tolist()
    alpha = torch.full((3, 5, 4), 0.25)
    pen = doubly_stochastic_penalty(alpha, mask)
    # sum over t of 0.25 is 0.25 * n_words per cell; penalty = 4 * (1 - 0.25 n)^2
    assert torch.allclose(pen, 4 * (1 - 0.25 * (lengths - 1).float()) ** 2)


def test_nll_ignores_padding_targets():
    caps, lengths = caption_batch()
    logits = torch.zeros(3, 5, 15)
    # uniform distribution: NLL = n_words * log V
    assert torch.allclose(
        caption_nll(logits, caps, lengths),
        (lengths - 1).float() * torch.log(torch.tensor(15.0)),
    )
