"""The Transformer captioner's decoding with its self-attention cache against
recomputing the prefix at every step (`transformer_beyond.PrefixRecompute`), greedy and
beam 3, at the paper's base width with random weights and features. Both decoders must
return the same captions; the table gives milliseconds per image and the speed-up.

    .venv/bin/python bench/bench_transformer.py --threads 2
    .venv/bin/python bench/bench_transformer.py --layers 6 --d-model 512 --max-len 20
    --images 50

Quality beside soft attention on the scenes: bench/bench_scenes_quality.py --models
soft,transformer. Prints a table and writes bench/out/transformer_decoding.json. Not run
by CI.
"""

import argparse, platform, time

import torch

from sat_tutorial.core import seed_everything
from sat_tutorial.decoding import beam_search, greedy
from sat_tutorial.transformer import TransformerCaptioner
from sat_tutorial.transformer_beyond import PrefixRecompute

from benchutil import loadavg, sig, table, write_json


def timed(fn, repeats):
    "The best of `repeats` wall-clock timings of fn() in seconds, and its last result."
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument(
        "--vocab",
        type=int,
        default=2500,
        help="about Flickr8k's vocabulary at min count 5",
    )
    p.add_argument("--grid", type=int, default=7, help="L = grid² annotation vectors")
    p.add_argument("--feature-dim", type=int, default=1280)
    p.add_argument("--images", type=int, default=50)
    p.add_argument("--max-len", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default="bench/out/transformer_decoding.json")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    seed_everything(0)
    model = TransformerCaptioner(
        a.vocab,
        a.feature_dim,
        embed_dim=a.d_model,
        hidden_dim=a.d_model,
        attention_dim=a.d_model,
        heads=a.heads,
        layers=a.layers,
    ).eval()
    model.out = torch.nn.Linear(
        a.d_model, a.vocab
    )  # untied: a random model with tied output mostly repeats its input word
    feats = torch.randn(a.images, a.grid**2, a.feature_dim)
    rows = []
    for search, run in (
        ("greedy", lambda m: greedy(m, feats, a.max_len)),
        ("beam 3", lambda m: beam_search(m, feats, 3, a.max_len)),
    ):
        t_cache, caps_cache = timed(lambda: run(model), a.repeats)
        t_prefix, caps_prefix = timed(lambda: run(PrefixRecompute(model)), a.repeats)
        same = [c.tokens for c in caps_cache] == [c.tokens for c in caps_prefix]
        if not same:
            raise SystemExit(
                f"{search}: the cached and the recomputing decoder disagree"
            )
        words = sum(len(c.tokens) for c in caps_cache) / len(caps_cache)
        rows.append(
            {
                "search": search,
                "mean words": sig(words),
                "cached ms/image": sig(1e3 * t_cache / a.images),
                "recompute ms/image": sig(1e3 * t_prefix / a.images),
                "speed-up": sig(t_prefix / t_cache),
                "same captions": same,
            }
        )
    table(rows)
    write_json(
        {
            "config": vars(a),
            "rows": rows,
            "torch": torch.__version__,
            "machine": platform.processor() or platform.machine(),
            "threads": a.threads,
            "loadavg": loadavg(),
        },
        a.out,
    )


if __name__ == "__main__":
    main()
