"""Torch threads on a busy CPU: wall time of a fixed number of scenes training steps
(`sat-tutorial train --data scenes`, soft attention) alone, beside one busy process and
beside two (each a Python spin loop), with 1 thread, 2 threads and the default policy
(`sat_tutorial.flags.default_threads`: the usable CPUs minus those busy at start).

    .venv/bin/python bench/bench_threads.py                 # 40 steps, 3 repetitions
    .venv/bin/python bench/bench_threads.py --steps 2 --reps 1 --n-train 200   # smoke

Each measurement is one fresh `sat-tutorial train` process, so every run pays the same
start-up; the variants are interleaved within each repetition, so slow spells of the
machine are shared, and the table gives medians. Before each default run a probe
reports the thread count the policy picks under the same conditions. OMP_NUM_THREADS
is removed from the environment of every run (it would override the policy). Prints a
table and writes bench/out/threads.json. Run it on an otherwise idle machine.
"""

import argparse, datetime, os, platform, statistics, subprocess, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import loadavg, table, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "threads.json"
SPIN = "while True: pass"
PROBE = "from sat_tutorial.core import default_threads; print(default_threads())"


def env() -> dict:
    "The environment of every run: this one, without OMP_NUM_THREADS."
    e = dict(os.environ)
    e.pop("OMP_NUM_THREADS", None)
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), e.get("PYTHONPATH")]))
    return e


def start_busy(n: int) -> list[subprocess.Popen]:
    "n spin-loop processes, given a moment to get going."
    procs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(n)]
    time.sleep(1.0 if procs else 0)
    return procs


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
        p.wait()


def train_seconds(args, threads: int | None, out: Path) -> float:
    "Wall seconds of one training run (`threads` None: the default policy)."
    cmd = [sys.executable, "-m", "sat_tutorial", "train", "--data", "scenes"]
    cmd += [
        "--model",
        "soft",
        "--steps",
        str(args.steps),
        "--n-train",
        str(args.n_train),
    ]
    cmd += ["--n-val", "20", "--n-test", "20", "--val-every", str(args.steps)]
    cmd += ["--ckpt-every", str(args.steps), "--device", "cpu", "--out", str(out)]
    cmd += ["--overwrite"] if out.exists() else []
    cmd += [] if threads is None else ["--threads", str(threads)]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env(), capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"bench_threads: {' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=40, help="training steps per run")
    ap.add_argument("--n-train", type=int, default=2000, help="training scenes")
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions")
    ap.add_argument("--busy", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    variants = {"1": 1, "2": 2, "default": None}
    times = {(b, v): [] for b in args.busy for v in variants}
    picked = {b: [] for b in args.busy}
    with tempfile.TemporaryDirectory() as d:
        for rep in range(args.reps):
            for b in args.busy:
                procs = start_busy(b)
                try:
                    for name, threads in variants.items():
                        if threads is None:
                            probe = subprocess.run(
                                [sys.executable, "-c", PROBE],
                                env=env(),
                                capture_output=True,
                                text=True,
                            )
                            picked[b].append(int(probe.stdout.split()[-1]))
                        s = train_seconds(args, threads, Path(d) / "run")
                        times[(b, name)].append(s)
                        print(f"rep {rep + 1}, {b} busy, threads {name}: {s:.1f} s")
                finally:
                    stop(procs)
    rows = []
    for b in args.busy:
        med = {v: statistics.median(times[(b, v)]) for v in variants}
        best = min(med["1"], med["2"])
        rows.append(
            {
                "busy processes": b,
                "1 thread (s)": round(med["1"], 1),
                "2 threads (s)": round(med["2"], 1),
                "default (s)": round(med["default"], 1),
                "default picked": "/".join(map(str, picked[b])),
                "default / best": round(med["default"] / best, 2),
            }
        )
    print(
        f"\nmedian wall seconds of {args.steps} scenes training steps, {args.reps} reps"
    )
    table(rows)
    write_json(
        {
            "what": "wall seconds of `sat-tutorial train --data scenes` runs",
            "steps": args.steps,
            "n_train": args.n_train,
            "reps": args.reps,
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "loadavg_end": loadavg(),
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "times": {f"{b} busy, threads {v}": t for (b, v), t in times.items()},
            "default_picked": picked,
            "rows": rows,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
