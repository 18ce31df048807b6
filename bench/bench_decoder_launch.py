"""The soft-attention decoder's small-batch launch bound: greedy decoding, one word per
step, is a chain of small kernels; at small batches the GPU waits for Python to launch
them. This times a paper-size decoder (`--model soft`'s class, random weights, eval
mode) decoding a fixed number of words per caption in four ways, at several batch
sizes, and checks that each gives eager's words:

- eager: `model.step` then `argmax`, as `decoding.greedy` does;
- graph-step: the same step captured once as a CUDA graph and replayed per word;
- graph-caption: all the caption's steps captured as one CUDA graph (one replay per
  caption);
- compile: `torch.compile(model.step, mode="reduce-overhead")` (Inductor's fused
  kernels, replayed through CUDA graphs), with its compile time.

    python bench/bench_decoder_launch.py                      # a GPU; ~2 minutes
    python bench/bench_decoder_launch.py --device cpu --quick # smoke run (eager only)

Prints µs per word and words/s per way and batch size, and writes
bench/out/decoder_launch.json (--out to choose). CUDA graphs exist only on a GPU: on
a CPU only eager is timed.
"""

import argparse, datetime, platform, statistics, sys, time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import sig, sync, table, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from sat_tutorial.flags import get_device  # noqa: E402
from sat_tutorial.soft_attention_beyond import (  # noqa: E402
    FastSoftAttentionCaptioner,  # what --model soft builds
)

OUT = ROOT / "bench" / "out" / "decoder_launch.json"


def eager_words(step, state, words, n):
    "n greedy words from `state`, one call of `step` per word; (B, n) ids."
    out = []
    for _ in range(n):
        lp, state, _ = step(words, state)
        words = lp.argmax(-1)
        out.append(words)
    return torch.stack(out, 1)


class StepGraph:
    """One decoding step as a CUDA graph over static buffers: replay() advances the
    words and the LSTM state in place."""

    def __init__(self, step, state, words):
        self.h, self.c = state[0].clone(), state[1].clone()
        self.feats, self.keys = state[2], state[3]
        self.words = words.clone()
        self.graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside the capture (cuBLAS handles)
            for _ in range(3):
                step(self.words, (self.h, self.c, self.feats, self.keys))
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph):
            self._advance(step)

    def _advance(self, step):
        lp, (h, c, _, _), _ = step(self.words, (self.h, self.c, self.feats, self.keys))
        self.words.copy_(lp.argmax(-1))
        self.h.copy_(h)
        self.c.copy_(c)

    def reset(self, state, words):
        self.h.copy_(state[0])
        self.c.copy_(state[1])
        self.words.copy_(words)


def graph_step_words(g, state, words, n):
    g.reset(state, words)
    out = []
    for _ in range(n):
        g.graph.replay()
        out.append(g.words.clone())
    return torch.stack(out, 1)


class CaptionGraph(StepGraph):
    "All n steps of a caption in one CUDA graph; the words land in `self.out`."

    def __init__(self, step, state, words, n):
        self.n = n
        self.out = torch.empty(words.shape[0], n, dtype=torch.long, device=words.device)
        super().__init__(step, state, words)

    def _advance(self, step):
        for t in range(self.n):
            super()._advance(step)
            self.out[:, t].copy_(self.words)


def graph_caption_words(g, state, words, n):
    g.reset(state, words)
    g.graph.replay()
    return g.out.clone()


def compiled_step(model):
    """`model.step` through torch.compile's CUDA graphs: each call starts a new graph
    run, so the previous call's outputs are cloned out of the graph's memory."""
    fn = torch.compile(model.step, mode="reduce-overhead")

    def step(words, state):
        torch.compiler.cudagraph_mark_step_begin()
        lp, (h, c, feats, keys), a = fn(words, state)  # feats, keys: the inputs
        return lp.clone(), (h.clone(), c.clone(), feats, keys), a.clone()

    return step


def timed(fn, reps, device):
    "Median seconds of `reps` calls of fn() (after one untimed call), and its result."
    res = fn()
    times = []
    for _ in range(reps):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), res


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--device", default="auto")
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    ap.add_argument("--compile-batches", type=int, nargs="*", default=[1, 16])
    ap.add_argument("--feature-dim", type=int, default=512, help="D (VGG's conv5)")
    ap.add_argument("--regions", type=int, default=196, help="L = 14×14")
    ap.add_argument("--vocab", type=int, default=10000)
    ap.add_argument("--words", type=int, default=20, help="words per caption")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, seconds")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    if args.quick:
        args.batch_sizes, args.compile_batches, args.reps = [1, 4], [], 3
        args.vocab, args.regions, args.feature_dim = 1000, 49, 128
    device = get_device(args.device)
    gpu = device.type == "cuda"
    torch.manual_seed(0)
    model = FastSoftAttentionCaptioner(args.vocab, args.feature_dim).to(device).eval()
    n, rows = args.words, []
    print(
        f"device {device} "
        f"({torch.cuda.get_device_name(device) if gpu else platform.processor()}), "
        f"torch {torch.__version__}, D={args.feature_dim}, L={args.regions}, "
        f"V={args.vocab}, {n} words per caption, median of {args.reps}"
    )
    with torch.inference_mode():
        for B in args.batch_sizes:
            feats = torch.randn(B, args.regions, args.feature_dim, device=device)
            state = model.init_state(feats)
            words = torch.ones(B, dtype=torch.long, device=device)  # <start>
            ways = {"eager": lambda: eager_words(model.step, state, words, n)}
            if gpu:
                gs = StepGraph(model.step, state, words)
                gc = CaptionGraph(model.step, state, words, n)
                ways["graph-step"] = lambda: graph_step_words(gs, state, words, n)
                ways["graph-caption"] = lambda: graph_caption_words(gc, state, words, n)
            compile_s = None
            if gpu and B in args.compile_batches:
                t0 = time.perf_counter()
                try:
                    step = compiled_step(model)
                    eager_words(step, state, words, n)  # compiles and records
                    compile_s = time.perf_counter() - t0
                    ways["compile"] = lambda: eager_words(step, state, words, n)
                except Exception as e:  # a backend that fails is a row, not a crash
                    print(f"compile at batch {B} failed: {type(e).__name__}: {e}")
            base = None
            for way, fn in ways.items():
                sec, toks = timed(fn, args.reps, device)
                base = toks if base is None else base
                same = float((toks == base).float().mean())
                us = sec / n * 1e6
                rows.append(
                    {
                        "batch": B,
                        "way": way,
                        "us_per_word": sig(us),
                        "words_per_s": sig(B * n / sec),
                        "same_words_as_eager": round(same, 4),
                        "compile_s": round(compile_s, 1) if way == "compile" else "",
                    }
                )
            eager_us = rows[-len(ways)]["us_per_word"]
            for r in rows[-len(ways) :]:
                r["speedup"] = sig(eager_us / r["us_per_word"])
    table(rows)
    write_json(
        {
            "when": datetime.datetime.now().isoformat(timespec="seconds"),
            "device": str(device),
            "gpu": torch.cuda.get_device_name(device) if gpu else None,
            "torch": torch.__version__,
            "args": vars(args),
            "rows": rows,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
