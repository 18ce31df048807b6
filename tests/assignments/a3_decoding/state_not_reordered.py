"""The state rows are not reordered after the top-k: each new beam goes on with the
LSTM state of whatever beam used to sit in its row, not the one it extends.
Its error shows from the third word: the brute-force check (3 words) sees it only
when a best caption is that long under the grading seed's inputs."""


# loses: a3_package_test
# may lose: a3_brute_force_test
# %% a3_beam
def beam_search(model, feats, beam_size=3, max_len=20):
    model.eval()
    B, K = feats.shape[0], beam_size
    static = getattr(model, "static_state", ())
    with torch.no_grad():
        state = expand_state(model.init_state(feats), K, static)
        scores = torch.zeros(B, K)
        scores[:, 1:] = float("-inf")
        words = torch.full((B * K,), START, dtype=torch.long)
        finished = torch.zeros(B * K, dtype=torch.bool)
        history = torch.zeros(B * K, 0, dtype=torch.long)
        for _ in range(max_len):
            lp, state, _ = model.step(words, state)
            lp = lp.float().clone()
            V = lp.shape[1]
            lp[finished] = float("-inf")
            lp[finished, PAD] = 0.0
            cand = (scores.reshape(-1, 1) + lp).reshape(B, K * V)
            scores, idx = cand.topk(K, dim=1)
            src = (torch.arange(B)[:, None] * K + idx // V).reshape(-1)
            words = (idx % V).reshape(-1)
            history = torch.cat([history[src], words[:, None]], 1)
            finished = finished[src] | (words == END)
            if finished.all():
                break
        out = []
        for b in range(B):
            k = int(scores[b].argmax())
            toks = history[b * K + k].tolist()
            out.append(
                (toks[: toks.index(END)] if END in toks else toks, float(scores[b, k]))
            )
    return out
