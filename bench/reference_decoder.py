"""A *reference* soft-attention decoder, written the way popular PyTorch
image-captioning tutorials write it.

Same maths and the same parameter shapes as
`sat_tutorial.soft_attention.SoftAttentionCaptioner` (additive attention, scalar β gate,
LSTMCell on [E y_{t-1}; ẑ_t], h_0/c_0 from the mean annotation, deep output L_o(E y +
L_h h + L_z ẑ)), but organised as those tutorials do:

* the attention module projects the annotations, W_a·a_i + b, *inside* the time loop, at
  every step;
* the vocabulary projection L_o runs per step inside the loop, its output written into a
  preallocated `(B, T, V)` tensor;
* the LSTM input is the concatenation [E y_{t-1}; ẑ_t] fed to `nn.LSTMCell` every step.

The context is computed with the same `bmm` as the package (tutorials often write `(a *
α[..., None]).sum(1)`, which is slower still); so the reference differs from the package
only in the two points above, and the benchmark measures what computing the keys once
and the vocabulary projection once buys.

`ReferenceSoftAttentionDecoder.from_captioner(model)` copies a
`SoftAttentionCaptioner`'s weights (state-dict mapping in `map_state_dict`), so both
compute the same function; `bench_soft_attention.py` checks that they give the same loss
and gradients before timing them.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from sat_tutorial.soft_attention import SoftAttentionCaptioner


class TutorialAttention(nn.Module):
    """Additive attention as tutorials write it: the encoder projection is part of every
    call."""

    def __init__(self, feature_dim, hidden_dim, attention_dim):
        super().__init__()
        self.encoder_att = nn.Linear(feature_dim, attention_dim)
        self.decoder_att = nn.Linear(hidden_dim, attention_dim, bias=False)
        self.full_att = nn.Linear(attention_dim, 1)

    def forward(self, feats, h):
        att1 = self.encoder_att(feats)  # (B, L, A) -- recomputed every step
        att2 = self.decoder_att(h)  # (B, A)
        e = self.full_att(torch.tanh(att1 + att2.unsqueeze(1))).squeeze(2)  # (B, L)
        alpha = torch.softmax(e, dim=1)
        z = torch.bmm(alpha.unsqueeze(1), feats).squeeze(1)  # (B, D)
        return z, alpha


class ReferenceSoftAttentionDecoder(nn.Module):
    def __init__(
        self,
        vocab_size,
        feature_dim,
        embed_dim=512,
        hidden_dim=512,
        attention_dim=512,
        dropout=0.5,
        alpha_c=1.0,
    ):
        super().__init__()
        self.vocab_size, self.alpha_c = vocab_size, alpha_c
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.attention = TutorialAttention(feature_dim, hidden_dim, attention_dim)
        self.f_beta = nn.Linear(hidden_dim, 1)
        self.init_h = nn.Linear(feature_dim, hidden_dim)
        self.init_c = nn.Linear(feature_dim, hidden_dim)
        self.decode_step = nn.LSTMCell(embed_dim + feature_dim, hidden_dim)
        self.L_h = nn.Linear(hidden_dim, embed_dim)
        self.L_z = nn.Linear(feature_dim, embed_dim)
        self.fc = nn.Linear(embed_dim, vocab_size)  # L_o
        self.dropout = nn.Dropout(dropout)

    def init_hidden_state(self, feats):
        mean = feats.mean(dim=1)
        return torch.tanh(self.init_h(mean)), torch.tanh(self.init_c(mean))

    def forward(self, feats, captions, lengths):
        B, L, _ = feats.shape
        T = captions.shape[1] - 1
        h, c = self.init_hidden_state(feats)
        embeddings = self.embedding(captions)  # (B, T+1, E)
        predictions = feats.new_zeros(B, T, self.vocab_size)
        alphas = feats.new_zeros(B, T, L)
        for t in range(T):
            emb = embeddings[:, t]
            z, alpha = self.attention(feats, h)
            z = torch.sigmoid(self.f_beta(h)) * z  # β_t ẑ_t
            h, c = self.decode_step(torch.cat([emb, z], dim=1), (h, c))
            preds = self.fc(
                self.dropout(emb + self.L_h(h) + self.L_z(z))
            )  # (B, V) -- per step
            predictions[:, t] = preds
            alphas[:, t] = alpha
        return predictions, alphas

    # the same objective as the package's model: its `loss` only calls `self(...)` and
    # reads `alpha_c`
    loss = SoftAttentionCaptioner.loss

    @classmethod
    def from_captioner(cls, model) -> "ReferenceSoftAttentionDecoder":
        """A reference decoder holding a copy of `model`'s (a `SoftAttentionCaptioner`)
        weights."""
        assert model.f_beta is not None and not getattr(
            model, "uniform_attention", False
        )
        A = model.attention.W_a.out_features
        ref = cls(
            model.vocab_size,
            model.feature_dim,
            model.embed_dim,
            model.hidden_dim,
            A,
            model.dropout.p,
            model.alpha_c,
        )
        ref.load_state_dict(map_state_dict(model.state_dict()), strict=True)
        return ref.to(next(model.parameters()).device)


# package name -> reference name (a prefix rename; shapes are identical)
_RENAMES = {
    "embed.": "embedding.",
    "attention.W_a.": "attention.encoder_att.",
    "attention.W_h.": "attention.decoder_att.",
    "attention.w.": "attention.full_att.",
    "lstm.": "decode_step.",
    "L_o.": "fc.",
}


def map_state_dict(sd: dict) -> dict:
    "A `SoftAttentionCaptioner` state dict with the reference decoder's names."
    out = {}
    for k, v in sd.items():
        for old, new in _RENAMES.items():
            if k.startswith(old):
                k = new + k[len(old) :]
                break
        out[k] = v.detach().clone()
    return out
