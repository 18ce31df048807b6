"""Batched beam search (sat_tutorial.decoding.beam_search, beam 5, max_len 20) over 500
images against the same function called one image at a time, with a paper-size
soft-attention decoder (random weights), and a check that every image gets identical
tokens.

    # a few minutes on 2 cores
    .venv/bin/python bench/bench_decoding.py --feature-dims 2048 --batch-sizes 100
    --what-if
    # ~5 min
    .venv/bin/python bench/bench_decoding.py --feature-dims 512 --batch-sizes 10 50 100
    500 --what-if
    .venv/bin/python bench/bench_decoding.py --feature-dims 2048 --batch-sizes 10 20 50
    500 --single-limit 100
    .venv/bin/python bench/bench_decoding.py --quick     # smoke run, seconds

(The defaults, both D and batch sizes 50/100/500, take ~11 minutes on 2 idle cores: run
one D at a time.)

Random weights give near-uniform word distributions, under which beam search stops as
early as <end> is allowed (every further word only lowers the score). To get realistic
caption lengths the benchmark model adds
    b(t) = 20 * tanh(t - tau_image)
to the <end> logit at step t (t = words emitted so far), where tau_image in [9.5, 18.5]
is a fixed function of the image (a random projection of its mean annotation, calibrated
once to spread over that range): <end> is all but impossible before tau and all but
certain after it, so captions end after 10-19 words. The bias rides in the decoder state
(two (B,) tensors), so `beam_search` drives the model through the unchanged Captioner
protocol.

Writes bench/out/decoding.json.
"""

import argparse, datetime, os, platform, statistics, sys, time
from pathlib import Path

import torch

from benchutil import loadavg, table, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
import contextlib  # noqa: E402
from sat_tutorial.decoding import beam_search  # noqa: E402
from sat_tutorial.soft_attention import SoftAttentionCaptioner  # noqa: E402

OUT = ROOT / "bench" / "out" / "decoding.json"
END = 2


def mem_available():
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class LengthBiasedCaptioner(SoftAttentionCaptioner):
    """A SoftAttentionCaptioner whose <end> logit gets b(t) = sharpness·tanh(t −
    τ(image)) (see the module docstring)."""

    def __init__(self, *args, tau_range=(9.5, 18.5), sharpness=20.0, **kw):
        super().__init__(*args, **kw)
        self.tau_range, self.sharpness = tau_range, sharpness
        self.register_buffer(
            "len_dir", torch.randn(self.feature_dim) / self.feature_dim**0.5
        )
        self.register_buffer(
            "len_stats", torch.tensor([0.0, 1.0])
        )  # mean, std of the projection

    def _u(self, feats):
        return (feats.mean(1) @ self.len_dir - self.len_stats[0]) / self.len_stats[1]

    def calibrate(self, feats):
        """Fix the projection's mean and std (over a set of images) so τ spreads over
        `tau_range`."""
        u = torch.cat(
            [
                feats[i : i + 100].mean(1) @ self.len_dir
                for i in range(0, len(feats), 100)
            ]
        )
        self.len_stats.copy_(torch.stack([u.mean(), u.std()]))

    def init_state(self, feats):
        lo, hi = self.tau_range
        tau = lo + (hi - lo) * torch.special.ndtr(
            self._u(feats)
        )  # (B,) ~ uniform over the range
        return (*super().init_state(feats), torch.zeros_like(tau), tau)

    def step(self, words, state):
        *st, t, tau = state
        lp, st, alpha = super().step(words, tuple(st))
        lp = lp.clone()
        lp[:, END] += self.sharpness * torch.tanh(t - tau)
        return lp.log_softmax(-1), (*st, t + 1, tau), alpha


@contextlib.contextmanager
def every_state_tensor_expanded(model):
    """What-if (bench only): decode as before the Captioner protocol had `static_state`
    -- every state tensor, the annotations a (B·K, L, D) and keys (B·K, L, A) included,
    repeated K times and reordered at every step."""
    saved = model.static_state
    model.static_state = ()
    try:
        yield
    finally:
        model.static_state = saved


def decode_single(model, feats, K, max_len):
    caps = []
    for i in range(len(feats)):
        caps += beam_search(model, feats[i : i + 1], K, max_len=max_len)
    return caps


def decode_batched(model, feats, K, max_len, bs):
    caps = []
    for i in range(0, len(feats), bs):
        caps += beam_search(model, feats[i : i + bs], K, max_len=max_len)
    return caps


def timed(fn):
    "Wall seconds, process-CPU seconds, result."
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t, time.process_time() - c, out


def profile(fn, top):
    from torch.profiler import ProfilerActivity, profile as prof

    with prof(activities=[ProfilerActivity.CPU]) as p:
        fn()
    ev = [e for e in p.key_averages() if e.self_cpu_time_total > 0]
    tot = sum(e.self_cpu_time_total for e in ev)
    ev.sort(key=lambda e: -e.self_cpu_time_total)
    return [
        {
            "op": e.key,
            "calls": e.count,
            "self ms": round(e.self_cpu_time_total / 1e3, 1),
            "share %": round(100 * e.self_cpu_time_total / tot, 1),
        }
        for e in ev[:top]
    ]


def run(args):
    if args.quick:
        S = dict(N=24, L=16, E=32, H=32, A=32, V=300)
        feature_dims = [64]
        batch_sizes = [6, 24]
    else:
        S = dict(N=args.images, L=196, E=512, H=512, A=512, V=10000)
        feature_dims = args.feature_dims
        batch_sizes = args.batch_sizes
    N, L, E, H, A, V, K = S["N"], S["L"], S["E"], S["H"], S["A"], S["V"], args.beam_size
    n_single = min(N, args.single_limit or N)
    print(
        f"threads={torch.get_num_threads()}  load avg before: {loadavg()}", flush=True
    )
    result = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "threads": torch.get_num_threads(),
        "load_before": loadavg(),
        "sizes": S,
        "beam_size": K,
        "max_len": args.max_len,
        "configs": [],
    }
    rows = []
    for D in feature_dims:
        torch.manual_seed(0)
        model = LengthBiasedCaptioner(V, D, E, H, A).eval()
        feats = torch.relu(
            torch.randn(N, L, D, generator=torch.Generator().manual_seed(D))
        )
        model.calibrate(feats)
        # warm-up both paths
        beam_search(model, feats[:1], K, max_len=args.max_len)
        beam_search(model, feats[: min(N, batch_sizes[0])], K, max_len=args.max_len)
        # rounds: one slice of the one-at-a-time pass, then every batch size over all N
        # images (shares load noise)
        chunks = [list(range(n_single))[r :: args.reps] for r in range(args.reps)]
        single_caps, single_s, single_c = {}, 0.0, 0.0
        batched = {bs: {"times": [], "cpu": [], "caps": None} for bs in batch_sizes}
        for r in range(args.reps):
            idx = chunks[r]
            s, c, caps = timed(
                lambda: [
                    beam_search(model, feats[i : i + 1], K, max_len=args.max_len)[0]
                    for i in idx
                ]
            )
            single_s += s
            single_c += c
            single_caps.update(zip(idx, caps))
            line = (
                f"  D={D} round {r + 1} (load {loadavg()[0]}): one-at-a-time "
                f"{len(idx)} images {s:.1f} s ({c:.1f} cpu-s)"
            )
            for bs in batch_sizes:
                need = min(bs, N) * K * L * (D + A) * 4 * 2.5
                avail = mem_available()
                if avail is not None and need > 0.7 * avail:
                    batched[bs]["skipped"] = (
                        f"needs ~{need / 2**30:.1f} GiB, {avail / 2**30:.1f} "
                        "GiB available"
                    )
                    continue
                t, c, caps = timed(
                    lambda: decode_batched(model, feats, K, args.max_len, bs)
                )
                batched[bs]["times"].append(t)
                batched[bs]["cpu"].append(c)
                if batched[bs]["caps"] is None:
                    batched[bs]["caps"] = caps
                line += f" | batch {bs}: {t:.1f} s ({c:.1f} cpu-s)"
            print(line, flush=True)
        single = [single_caps[i] for i in range(n_single)]
        col_s = f"s / {N} img"
        per_img_single = single_s / n_single
        per_img_single_c = single_c / n_single
        lengths = [len(c.tokens) for c in single]
        cfg = {
            "D": D,
            "single": {
                "images_timed": n_single,
                "seconds": single_s,
                "cpu_seconds": single_c,
                "per_image_s": per_img_single,
            },
            "mean_caption_words": statistics.mean(lengths),
            "min_words": min(lengths),
            "max_words": max(lengths),
            "finished_fraction": sum(c.finished for c in single) / n_single,
            "batched": {},
        }
        rows.append(
            {
                "D": D,
                "mode": "one image at a time"
                + ("" if n_single == N else f" ({n_single} timed, extrapolated)"),
                "batch": 1,
                col_s: round(per_img_single * N, 1),
                "ms/img": round(1e3 * per_img_single, 2),
                "img/s": round(1 / per_img_single, 1),
                "cpu-ms/img": round(1e3 * per_img_single_c, 2),
                "speed-up": "1x",
                "speed-up (cpu-s)": "1x",
                "identical": "-",
            }
        )
        best = None
        for bs, b in batched.items():
            if not b["times"]:
                rows.append(
                    {
                        "D": D,
                        "mode": "batched",
                        "batch": bs,
                        "identical": "skipped: " + b.get("skipped", ""),
                    }
                )
                continue
            med = statistics.median(b["times"])
            medc = statistics.median(b["cpu"])
            same = [b["caps"][i].tokens == single[i].tokens for i in range(n_single)]
            dlp = max(
                abs(b["caps"][i].logprob - single[i].logprob) for i in range(n_single)
            )
            n_same = sum(same)
            cfg["batched"][bs] = {
                "times_s": b["times"],
                "cpu_s": b["cpu"],
                "median_s": med,
                "per_image_s": med / N,
                "identical": n_same,
                "compared": n_single,
                "max_logprob_diff": dlp,
                "mismatches": [i for i, s in enumerate(same) if not s][:20],
            }
            rows.append(
                {
                    "D": D,
                    "mode": "batched",
                    "batch": bs,
                    col_s: round(med, 1),
                    "ms/img": round(1e3 * med / N, 2),
                    "img/s": round(N / med, 1),
                    "cpu-ms/img": round(1e3 * medc / N, 2),
                    "speed-up": f"{per_img_single / (med / N):.1f}x",
                    "speed-up (cpu-s)": f"{per_img_single_c / (medc / N):.1f}x",
                    "identical": f"{n_same}/{n_single}",
                    "max |Δ logprob|": f"{dlp:.1e}",
                }
            )
            if best is None or med < statistics.median(batched[best]["times"]):
                best = bs
        if best is not None:
            sp = per_img_single / (statistics.median(batched[best]["times"]) / N)
            cfg["best_batch"] = best
            cfg["speed_up"] = sp
            print(
                f"  D={D}: mean caption {cfg['mean_caption_words']:.1f} words "
                f"({cfg['min_words']}-{cfg['max_words']}), "
                f"best batch {best}: {sp:.1f}x; identical "
                f"{cfg['batched'][best]['identical']}/{n_single}",
                flush=True,
            )
            if args.what_if:
                n_wi = min(n_single, args.what_if_single)
                with every_state_tensor_expanded(model):
                    tw, cw, caps_w = timed(
                        lambda: decode_batched(model, feats, K, args.max_len, best)
                    )
                    ts, cs, caps_s = timed(
                        lambda: [
                            beam_search(
                                model, feats[i : i + 1], K, max_len=args.max_len
                            )[0]
                            for i in range(n_wi)
                        ]
                    )
                n_same_w = sum(
                    caps_w[i].tokens == single[i].tokens for i in range(n_single)
                )
                n_same_s = sum(
                    caps_s[i].tokens == single[i].tokens for i in range(n_wi)
                )
                cfg["what_if"] = {
                    "batch": best,
                    "batched_s": tw,
                    "batched_cpu_s": cw,
                    "single_images": n_wi,
                    "single_s": ts,
                    "identical_batched": n_same_w,
                    "identical_single": n_same_s,
                }
                rows.append(
                    {
                        "D": D,
                        "mode": "what-if: every state tensor expanded (before "
                        f"static_state), one at a time ({n_wi} timed, "
                        "extrapolated)",
                        "batch": 1,
                        col_s: round(ts / n_wi * N, 1),
                        "ms/img": round(1e3 * ts / n_wi, 2),
                        "img/s": round(n_wi / ts, 1),
                        "cpu-ms/img": round(1e3 * cs / n_wi, 2),
                        "speed-up": f"{per_img_single / (ts / n_wi):.1f}x",
                        "identical": f"{n_same_s}/{n_wi}",
                    }
                )
                rows.append(
                    {
                        "D": D,
                        "mode": "what-if: every state tensor expanded (before "
                        "static_state), batched (1 pass)",
                        "batch": best,
                        col_s: round(tw, 1),
                        "ms/img": round(1e3 * tw / N, 2),
                        "img/s": round(N / tw, 1),
                        "cpu-ms/img": round(1e3 * cw / N, 2),
                        "speed-up": f"{per_img_single / (tw / N):.1f}x",
                        "identical": f"{n_same_w}/{n_single}",
                    }
                )
                print(
                    f"  D={D} what-if: batched {best}: {tw:.1f} s, one at a "
                    f"time {ts / n_wi * 1e3:.0f} ms/img",
                    flush=True,
                )
            if args.profile:
                n_prof = min(N, best, 50)
                cfg["profile_batched"] = profile(
                    lambda: beam_search(model, feats[:n_prof], K, max_len=args.max_len),
                    args.profile,
                )
                cfg["profile_single"] = profile(
                    lambda: [
                        beam_search(model, feats[i : i + 1], K, max_len=args.max_len)
                        for i in range(min(N, 5))
                    ],
                    args.profile,
                )
        for bs, b in batched.items():
            if b["caps"] is not None:
                assert all(
                    b["caps"][i].tokens == single[i].tokens for i in range(n_single)
                ), (
                    f"D={D} batch {bs}: captions differ from one-at-a-time "
                    f"decoding at {cfg['batched'][bs]['mismatches']}"
                )
        result["configs"].append(cfg)
        del model, feats

    result["load_after"] = loadavg()
    result["rows"] = rows
    result["machine"] = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "cpus": os.cpu_count(),
    }
    print(
        f"\nbeam search, beam {K}, max_len {args.max_len}, {N} images, L={L}, "
        f"E=H=A={E}, V={V}, threads={torch.get_num_threads()}, "
        f"batched: median of {args.reps} passes; one-at-a-time: one pass "
        f"split into {args.reps} slices interleaved with them"
    )
    table(rows)
    for c in result["configs"]:
        print(
            f"D={c['D']}: mean caption length {c['mean_caption_words']:.1f} "
            f"words (min {c['min_words']}, max {c['max_words']}), "
            f"finished {100 * c['finished_fraction']:.0f}%"
        )
        for k in ("profile_batched", "profile_single"):
            if k in c:
                print(f"\n{k} D={c['D']} (top ops by self CPU time):")
                table(c[k])
    print(f"\nload avg after: {result['load_after']}")
    out = (
        Path(args.out)
        if args.out
        else OUT.with_name("decoding_quick.json" if args.quick else OUT.name)
    )
    write_json(result, out)


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads (default: torch's default)",
    )
    p.add_argument(
        "--quick", action="store_true", help="tiny sizes: a smoke run in seconds"
    )
    p.add_argument("--images", type=int, default=500)
    p.add_argument(
        "--feature-dims",
        type=int,
        nargs="+",
        default=[2048, 512],
        help="D: 2048 (ResNet), 512 (VGG)",
    )
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[50, 100, 500])
    p.add_argument("--beam-size", type=int, default=5)
    p.add_argument("--max-len", type=int, default=20)
    p.add_argument(
        "--reps",
        type=int,
        default=1,
        help="timed passes of each batch size (median reported)",
    )
    p.add_argument(
        "--single-limit",
        type=int,
        default=0,
        help="time only this many images one at a time (extrapolate)",
    )
    p.add_argument(
        "--profile", type=int, default=8, help="show the top N ops (0: no profile)"
    )
    p.add_argument(
        "--what-if",
        action="store_true",
        help="also time beam_search as it was before static_state: every state "
        "tensor repeated K times and reordered",
    )
    p.add_argument(
        "--what-if-single",
        type=int,
        default=20,
        help="images decoded one at a time in the what-if",
    )
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
