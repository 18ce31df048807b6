"""Small helpers the benchmark scripts share: a plain-text table, the load average,
rounding to significant figures, the GPU's clock and memory, writing the JSON result,
and the package's training step on given batches."""

import json, os
from pathlib import Path

import torch


def table(rows, cols=None):
    """Print dicts as aligned columns (`cols`: which keys, in order; default: the first
    row's)."""
    cols = cols or list(rows[0])
    w = [max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in cols]
    print("  ".join(c.ljust(n) for c, n in zip(cols, w)))
    for r in rows:
        print("  ".join(str(r.get(c, "")).ljust(n) for c, n in zip(cols, w)))


def loadavg():
    "The 1/5/15-minute load averages, or None where the OS has none."
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def sig(x, n=3):
    "x rounded to n significant figures."
    return float(f"{x:.{n}g}")


def sync(device):
    """Wait for the GPU's queued work (a no-op on a CPU), so that a wall-clock timing
    covers it."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_gpu_mib(device):
    """The most GPU memory PyTorch held since the last
    `torch.cuda.reset_peak_memory_stats`, in MiB (None on a CPU)."""
    device = torch.device(device)
    return (
        round(torch.cuda.max_memory_allocated(device) / 2**20)
        if device.type == "cuda"
        else None
    )


def write_json(obj, path, indent=1):
    """Write a benchmark's result as JSON (anything JSON cannot hold, such as a Path, as
    its str), making the folder; say where."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=indent, default=str))
    print(f"wrote {path}")
    return path


def step_learner(
    enc, model, opt, batches, total, clip=5.0, amp=(None, None), device="cpu", cbs=()
):
    """A Learner (notebook 12c) that trains `enc` and `model` for `total` steps of
    `batches(learn)`, with `fit`'s mixed precision (`amp`: dtype and scaler) and
    clipping, and nothing saved: the package's one training step, for timing."""
    from types import SimpleNamespace

    from sat_tutorial.fit import caption_loss
    from sat_tutorial.learner import AMP, Clip, Clock, Learner, Limits

    device = torch.device(device)
    run = SimpleNamespace(run_encoder=enc, model=model, device=device, objective=None)

    def objective(learn, batch):  # fit's own: encode, then model.loss
        return caption_loss(run, batch)

    cbs = [Limits(Clock()), AMP(*amp, device), Clip(clip), *cbs]
    return Learner(opt, objective, batches, total, cbs)
