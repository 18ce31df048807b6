"""Exact resume on any device and autocast type: train 2N steps straight, and N steps, stop, resume, N more, then compare
the weights, the logged losses and (with fp16) the loss scaler's state. Notebook 12 checks this on a CPU in float32 and
fp16; this script is for a GPU, where cuDNN and atomics can make two runs differ even without a resume, so it also trains
2N steps straight twice: the resumed run is exact if it differs from the straight run no more than the straight run
differs from itself (0 with --deterministic).

    .venv/bin/python bench/bench_resume.py --device cuda --amp-dtype fp16 --deterministic
    .venv/bin/python bench/bench_resume.py --device cpu --amp-dtype bf16 --steps 10

Scenes, the small soft- or hard-attention captioner, dropout on. Writes JSON (--out). Not run by CI.
"""

from __future__ import annotations

import argparse, json, os, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch  # noqa: E402

from sat_tutorial.checkpoints import load_checkpoint  # noqa: E402
from sat_tutorial.flags import get_device  # noqa: E402
from sat_tutorial.fit import fit  # noqa: E402
from sat_tutorial.step_settings import AMP_DTYPES  # noqa: E402
from sat_tutorial.training import scenes_config  # noqa: E402


def max_diff(a: dict, b: dict) -> float:
    "The largest absolute difference between two checkpoints' floating-point weights, the captioner's and the encoder's (the scene CNN trains)."
    return max(
        (
            float((a[p][k].float() - b[p][k].float()).abs().max())
            for p in ("model", "encoder")
            for k in a[p]
            if torch.is_floating_point(a[p][k])
        ),
        default=0.0,
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=["soft", "hard"], default="soft")
    p.add_argument("--device", default="auto")
    p.add_argument(
        "--amp-dtype", choices=["off", *AMP_DTYPES], default="fp16", help="off: float32"
    )
    p.add_argument(
        "--steps", type=int, default=40, help="2N: the resumed run stops after N"
    )
    p.add_argument(
        "--deterministic",
        action="store_true",
        help="torch.use_deterministic_algorithms (and cuBLAS's fixed workspace)",
    )
    p.add_argument("--out", help="JSON to write")
    args = p.parse_args(argv)
    if args.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(
            True, warn_only=True
        )  # ops without a deterministic kernel warn; "straight twice" shows their effect
    device = get_device(args.device)
    cfg = scenes_config(
        model=args.model,
        steps=args.steps,
        n_train=200,
        n_val=0,
        n_test=0,
        batch_size=32,
        val_every=0,
        ckpt_every=0,
        seed=5,
        dropout=0.3,
        warmup=5,
        amp=args.amp_dtype != "off",
        amp_dtype="auto" if args.amp_dtype == "off" else args.amp_dtype,
    )
    quiet = dict(progress=False, log=lambda *a: None, device=device)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        fit(cfg, d / "straight", **quiet)
        fit(cfg, d / "again", **quiet)
        fit(cfg, d / "resumed", stop_at=args.steps // 2, **quiet)
        mid = load_checkpoint(d / "resumed" / "last.pt").get("scaler")
        fit(cfg, d / "resumed", resume=True, **quiet)
        a, a2, b = (
            load_checkpoint(d / n / "last.pt") for n in ("straight", "again", "resumed")
        )
    losses = lambda ck: [h["loss"] for h in ck["history"]]
    res = {
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "torch": torch.__version__,
        "model": args.model,
        "amp_dtype": args.amp_dtype,
        "steps": args.steps,
        "deterministic": args.deterministic,
        "seconds": round(time.perf_counter() - t0, 1),
        "max_weight_diff_resumed": max_diff(a, b),
        "max_weight_diff_straight_twice": max_diff(a, a2),
        "losses_equal_resumed": losses(a) == losses(b),
        "losses_equal_straight_twice": losses(a) == losses(a2),
        "scaler_mid": mid,
        "scaler_straight": a.get("scaler"),
        "scaler_resumed": b.get("scaler"),
        "first_last_loss": [losses(a)[0], losses(a)[-1]],
    }
    res["exact"] = (
        res["max_weight_diff_resumed"] <= res["max_weight_diff_straight_twice"]
        and (res["losses_equal_resumed"] or not res["losses_equal_straight_twice"])
        and res["scaler_straight"] == res["scaler_resumed"]
    )
    for k, v in res.items():
        print(f"{k}: {v}")
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1))
    return 0 if res["exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
