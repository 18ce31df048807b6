"""Teacher-forced forward + backward of the soft-attention decoder:
`SoftAttentionCaptioner` (keys W_a·a once per image, vocabulary projection once per
batch) against a tutorial-style reference decoder that recomputes the keys and runs L_o
at every step (bench/reference_decoder.py), at the paper's sizes, in the same run.

    # ~2 minutes on 2 idle cores
    .venv/bin/python bench/bench_soft_attention.py
    .venv/bin/python bench/bench_soft_attention.py --quick    # smoke run, seconds

Prints the analytic FLOP count of each version (the speed-up the arithmetic allows), the
measured samples/s (median of alternating repetitions; the speed-up achieved), this
machine's torch.mm GFLOP/s at the step's matmul sizes, the achieved GFLOP/s of the
training step, and the ops that dominate each version (torch.profiler). Writes
bench/out/soft_attention.json (--quick: soft_attention_quick.json; --out to choose).
"""

import argparse, datetime, os, platform, statistics, sys, time
from pathlib import Path

import torch

from benchutil import loadavg, sig, sync as sync_device, table, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_decoder import ReferenceSoftAttentionDecoder  # noqa: E402
from sat_tutorial.flags import get_device  # noqa: E402
from sat_tutorial.soft_attention import SoftAttention  # noqa: E402
from sat_tutorial.soft_attention_beyond import (  # noqa: E402
    FastSoftAttentionCaptioner as SoftAttentionCaptioner,  # what --model soft builds
)

OUT = ROOT / "bench" / "out" / "soft_attention.json"


# --------------------------------------------------------------------------------------
# -------------------------------
# FLOPs, analytically: multiply-adds of every matmul of one training step (B captions, T
# = predicted positions).
# Each entry: (name, MACs in the forward pass, backward factor). The backward factor is
# 2 when the matmul's input needs a
# gradient (grad input + grad weight), 1 when it does not (the annotations a are data:
# W_a·a, init_h/init_c(mean a) only
# need the weight gradient; α·a only needs the gradient w.r.t. α).
def matmuls(variant, B, T, L, D, E, H, A, V):
    per_image_keys = B * L * D * A
    mm = [
        ("init_h, init_c (D->H)", 2 * B * D * H, 1),
        ("keys W_a a (D->A)", per_image_keys * (T if variant == "reference" else 1), 1),
        ("W_h h (H->A)", T * B * H * A, 2),
        ("w . tanh(.) (A->1)", T * B * L * A, 2),
        ("context alpha . a (bmm)", T * B * L * D, 1),
        ("f_beta h (H->1)", T * B * H, 2),
        ("LSTM input [Ey; z] (E+D->4H)", T * B * (E + D) * 4 * H, 2),
        ("LSTM recurrent (H->4H)", T * B * H * 4 * H, 2),
        ("L_h h, L_z z (H,D->E)", T * B * (H + D) * E, 2),
        ("L_o (E->V)", T * B * E * V, 2),
    ]
    return mm


def flops(variant, **dims):
    mm = matmuls(variant, **dims)
    fwd = sum(m for _, m, _ in mm)
    return {
        "fwd_gmac": fwd / 1e9,
        "train_gflop_x3": 2 * 3 * fwd / 1e9,  # the simple rule: backward = 2 x forward
        "train_gflop_exact": 2 * sum(m * (1 + k) for _, m, k in mm) / 1e9,
        "keys_share_of_exact": sum(
            m * (1 + k) for n, m, k in mm if n.startswith("keys")
        )
        / sum(m * (1 + k) for _, m, k in mm),
    }


# --------------------------------------------------------------------------------------
# -------------------------------
DEVICE = torch.device("cpu")  # --device


def sync():
    sync_device(DEVICE)


def measure_mm(sizes, reps=5, min_s=0.25):
    """torch.mm GFLOP/s for each (M, K, N): best of `reps` timings of a loop lasting >=
    min_s."""
    out = []
    for M, K, N in sizes:
        a, b = torch.randn(M, K, device=DEVICE), torch.randn(K, N, device=DEVICE)
        torch.mm(a, b)
        sync()
        n = 1
        t = 0.0
        while True:
            t0 = time.perf_counter()
            for _ in range(n):
                torch.mm(a, b)
            sync()
            t = time.perf_counter() - t0
            if t >= min_s / reps or n >= 1 << 16:
                break
            n *= 2
        best = t / n
        for _ in range(reps - 1):
            t0 = time.perf_counter()
            for _ in range(n):
                torch.mm(a, b)
            sync()
            best = min(best, (time.perf_counter() - t0) / n)
        out.append({"M": M, "K": K, "N": N, "gflop/s": sig(2 * M * K * N / best / 1e9)})
    return out


class PlainTanh(SoftAttentionCaptioner):
    """What-if (bench only): the package's model with `torch.tanh` in the attention
    scores (the paper class's `SoftAttention`) instead of `fast_tanh_` (2σ(2x) − 1 in
    place), to show what that choice buys on this CPU."""

    attention_class = SoftAttention


WHAT_IFS = ("what-if: torch.tanh", "what-if: grads per step")


def make_batch(B, T, L, D, V, seed):
    g = torch.Generator().manual_seed(seed)
    feats = torch.relu(
        torch.randn(B, L, D, generator=g)
    )  # post-ReLU like CNN annotations
    caps = torch.randint(3, V, (B, T + 1), generator=g)
    caps[:, 0] = 1
    caps[:, -1] = 2  # <start> ... <end>
    lengths = torch.full((B,), T + 1)
    return feats.to(DEVICE), caps.to(DEVICE), lengths.to(DEVICE)


def check_same(model, ref, batch):
    """Both decoders compute the same loss and gradients (eval mode: no dropout masks to
    match)."""
    model.zero_grad(set_to_none=True)
    ref.zero_grad(set_to_none=True)
    model.eval()
    ref.eval()
    la, _ = model.loss(*batch)
    la.backward()
    lb, _ = ref.loss(*batch)
    lb.backward()
    pairs = [
        (model.attention.W_a.weight, ref.attention.encoder_att.weight),
        (model.L_o.weight, ref.fc.weight),
        (model.lstm.weight_ih, ref.decode_step.weight_ih),
        (model.embed.weight, ref.embedding.weight),
    ]
    gerr = max(
        float((p.grad - q.grad).abs().max() / q.grad.abs().max().clamp(min=1e-30))
        for p, q in pairs
    )
    model.zero_grad(set_to_none=True)
    ref.zero_grad(set_to_none=True)
    model.train()
    ref.train()
    la, lb = la.item(), lb.item()
    rel = abs(la - lb) / abs(lb)
    assert rel < 1e-5, f"losses differ: {la} vs {lb}"
    assert gerr < 1e-3, f"gradients differ (max rel err {gerr})"
    return {
        "loss_package": la,
        "loss_reference": lb,
        "loss_rel_diff": rel,
        "grad_max_rel_diff": gerr,
    }


def train_steps(m, batch, n):
    "Wall and process-CPU seconds per training step (forward + backward of the loss)."
    sync()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        loss, _ = m.loss(*batch)
        loss.backward()
        m.zero_grad(set_to_none=True)
    sync()
    return (time.perf_counter() - t0) / n, (time.process_time() - c0) / n


def profile(m, batch, top):
    "Top ops of one training step by self CPU time, grouped by op and input shapes."
    from torch.profiler import ProfilerActivity, profile as prof

    train_steps(m, batch, 1)
    with prof(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
        train_steps(m, batch, 1)
    ev = [
        e
        for e in p.key_averages(group_by_input_shape=True)
        if e.self_cpu_time_total > 0
    ]
    tot = sum(e.self_cpu_time_total for e in ev)
    ev.sort(key=lambda e: -e.self_cpu_time_total)
    shapes = lambda e: " ".join(
        "x".join(map(str, s)) for s in (e.input_shapes or []) if s
    )[:48]
    return [
        {
            "op": e.key,
            "input shapes": shapes(e),
            "calls": e.count,
            "self ms": round(e.self_cpu_time_total / 1e3, 1),
            "share %": round(100 * e.self_cpu_time_total / tot, 1),
        }
        for e in ev[:top]
    ]


def run(args):
    if args.quick:
        S = dict(B=4, T=8, L=16, E=32, H=32, A=32, V=200)
        feature_dims = [64, 32]
    else:
        S = dict(
            B=args.batch_size,
            T=args.caption_len + 1,
            L=196,
            E=512,
            H=512,
            A=512,
            V=10000,
        )
        feature_dims = args.feature_dims
    print(
        f"threads={torch.get_num_threads()}  load avg (1/5/15 min) before: {loadavg()}",
        flush=True,
    )
    result = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "threads": torch.get_num_threads(),
        "load_before": loadavg(),
        "sizes": S,
        "configs": [],
    }

    B, T, L, E, H, A, V = (S[k] for k in "BTLEHAV")
    sizes = sorted(
        {
            (B * L, feature_dims[0], A),
            (B * T, E, V),
            (B, feature_dims[0], 4 * H),
            (B, H, 4 * H),
            (B * L, A, 1),
        }
    )
    mm = measure_mm(sizes if not args.quick else sizes[:2], reps=3 if args.quick else 5)
    print("\ntorch.mm GFLOP/s at the step's matmul sizes (float32):")
    table(mm)

    rows, profiles = [], {}
    for D in feature_dims:
        dims = dict(B=B, T=T, L=L, D=D, E=E, H=H, A=A, V=V)
        torch.manual_seed(0)
        model = SoftAttentionCaptioner(V, D, E, H, A, dropout=0.5)
        ref = ReferenceSoftAttentionDecoder.from_captioner(model).to(DEVICE)
        model.to(DEVICE)
        batch = make_batch(B, T, L, D, V, seed=D)
        same = check_same(model, ref, batch)
        print(
            f"\nD={D}: same loss {same['loss_package']:.6f} vs "
            f"{same['loss_reference']:.6f} "
            f"(rel {same['loss_rel_diff']:.1e}), grads max rel diff "
            f"{same['grad_max_rel_diff']:.1e}",
            flush=True,
        )
        models = {"package": model}
        if args.what_if:
            models["what-if: torch.tanh"] = PlainTanh(V, D, E, H, A, dropout=0.5)
            models["what-if: grads per step"] = SoftAttentionCaptioner(
                V, D, E, H, A, dropout=0.5
            )
            models[
                "what-if: grads per step"
            ].step_grads_once = (
                False  # autograd's per-step ∂/∂W_z, ∂/∂U (StepOperand off)
            )
            for k in WHAT_IFS:
                models[k].to(DEVICE).load_state_dict(model.state_dict())
                same[k] = check_same(models[k], ref, batch)
        models["reference"] = ref
        for m in models.values():
            train_steps(m, batch, args.warmup)  # warm-up (train mode, dropout on)
        times, cpu = {k: [] for k in models}, {k: [] for k in models}
        for r in range(args.reps):  # alternate: share load noise
            for k, m in models.items() if r % 2 == 0 else reversed(models.items()):
                w, c = train_steps(m, batch, args.steps)
                times[k].append(w)
                cpu[k].append(c)
            print(
                f"  rep {r + 1} (load {loadavg()[0]}): "
                + "  ".join(
                    f"{k} {times[k][-1]:.3f} s/step ({cpu[k][-1]:.3f} cpu-s)"
                    for k in models
                ),
                flush=True,
            )
        f = {
            k: flops("reference" if k == "reference" else "package", **dims)
            for k in models
        }
        med = {k: statistics.median(v) for k, v in times.items()}
        medc = {k: statistics.median(v) for k, v in cpu.items()}
        speed = med["reference"] / med["package"]
        allowed3 = f["reference"]["train_gflop_x3"] / f["package"]["train_gflop_x3"]
        allowed = (
            f["reference"]["train_gflop_exact"] / f["package"]["train_gflop_exact"]
        )
        speed_cpu = medc["reference"] / medc["package"]
        summary = {
            "D": D,
            "allowed (x3 rule)": f"{allowed3:.2f}x",
            "allowed (exact)": f"{allowed:.2f}x",
            "achieved (wall)": f"{speed:.2f}x",
            "achieved (cpu-s)": f"{speed_cpu:.2f}x",
            "target": "5x",
            "met": speed >= 5,
        }
        if args.what_if:
            for k in WHAT_IFS:
                summary[k.replace("what-if: ", "what-if ") + " (wall)"] = (
                    f"{med['reference'] / med[k]:.2f}x"
                )
        print(
            f"  D={D}: allowed {allowed3:.2f}x (fwd x3) / {allowed:.2f}x "
            f"(exact backward), achieved {speed:.2f}x"
        )
        cfg = {
            "D": D,
            "check": same,
            "times_s_per_step": times,
            "cpu_s_per_step": cpu,
            "flops": f,
            "summary": summary,
            "median_s": med,
            "median_cpu_s": medc,
            "matmuls_fwd_gmac": {
                k: {n: round(m / 1e9, 3) for n, m, _ in matmuls(k, **dims)}
                for k in ("package", "reference")
            },
        }
        if args.profile:
            profiles[D] = {
                k: profile(m, batch, args.profile)
                for k, m in models.items()
                if not k.startswith("what-if")
            }
            cfg["profile"] = profiles[D]
        result["configs"].append(cfg)
        del model, ref, models

    result["load_after"] = loadavg()
    mm_after = measure_mm(
        sizes if not args.quick else sizes[:2], reps=3 if args.quick else 5
    )
    print("\ntorch.mm GFLOP/s again, after the runs:")
    table(mm_after)
    peak = max(max(r["gflop/s"] for r in mm + mm_after), 1e-9)
    for c in result["configs"]:
        D, f, med, medc, times = (
            c["D"],
            c["flops"],
            c["median_s"],
            c["median_cpu_s"],
            c["times_s_per_step"],
        )
        for k in med:
            rows.append(
                {
                    "D": D,
                    "decoder": k,
                    "fwd GMAC/step": sig(f[k]["fwd_gmac"]),
                    "train GFLOP/step (x3)": sig(f[k]["train_gflop_x3"]),
                    "train GFLOP/step (exact)": sig(f[k]["train_gflop_exact"]),
                    "s/step (median)": round(med[k], 3),
                    "min..max": f"{min(times[k]):.3f}..{max(times[k]):.3f}",
                    "samples/s": round(B / med[k], 1),
                    "cpu-s/step": round(medc[k], 3),
                    "achieved GFLOP/s": sig(f[k]["train_gflop_exact"] / med[k]),
                    "% of mm peak": sig(
                        100 * f[k]["train_gflop_exact"] / med[k] / peak
                    ),
                    "speed-up": f"{med['reference'] / med[k]:.2f}x",
                    "speed-up (cpu-s)": f"{medc['reference'] / medc[k]:.2f}x",
                }
            )
    result["mm_gflops"] = mm
    result["mm_gflops_after"] = mm_after
    result["mm_peak_gflops"] = peak
    result["rows"] = rows
    result["machine"] = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "cpus": os.cpu_count(),
        "device": str(DEVICE),
        "gpu": torch.cuda.get_device_name(DEVICE) if DEVICE.type == "cuda" else None,
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
    }
    print(
        f"\nteacher-forced forward+backward, batch {B}, T={T} predicted "
        f"tokens, L={L}, E=H=A={E}, V={V}, "
        f"threads={torch.get_num_threads()}, median of {args.reps} "
        f"alternating reps x {args.steps} step(s); "
        f"mm peak {peak} GFLOP/s; GFLOP/s from the exact count"
    )
    table(rows)
    print()
    table([c["summary"] for c in result["configs"]])
    for D, p in profiles.items():
        for k, rows_p in p.items():
            print(f"\nprofile D={D} {k} (one training step, top ops by self CPU time):")
            table(rows_p)
    print(f"\nload avg after: {result['load_after']}")
    out = (
        Path(args.out)
        if args.out
        else OUT.with_name("soft_attention_quick.json" if args.quick else OUT.name)
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
    p.add_argument(
        "--feature-dims",
        type=int,
        nargs="+",
        default=[2048, 512],
        help="D: 2048 (ResNet), 512 (VGG)",
    )
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument(
        "--caption-len",
        type=int,
        default=20,
        help="words per caption, plus <start> and <end>",
    )
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument(
        "--reps",
        type=int,
        default=5,
        help="alternating timed repetitions of each decoder",
    )
    p.add_argument(
        "--steps", type=int, default=1, help="training steps per timed repetition"
    )
    p.add_argument(
        "--profile",
        type=int,
        default=12,
        help="show the top N ops of each version (0: no profile)",
    )
    p.add_argument(
        "--no-what-if",
        dest="what_if",
        action="store_false",
        help="skip the bench-only variants (torch.tanh in place of fast_tanh_; "
        "gradients of W_z, U formed per step)",
    )
    p.add_argument(
        "--device",
        default="cpu",
        help="cpu or cuda (on a GPU: timings synchronise; the profile stays CPU-side, "
        "so pass --profile 0 there)",
    )
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    global DEVICE
    DEVICE = get_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
