"""Execute the notebooks and store their outputs, so that a reader sees every figure on
GitHub, in JupyterLab and in the book before running anything.

Each executed notebook is stamped in its metadata (`sat_tutorial.code_hash`) with a hash
of its code cells' sources. `tests/test_stored_outputs.py` fails when a notebook's
stored outputs were not produced by its current code, and names the command that fixes
it.

    python tools/notebooks.py run               # every notebook not current
    python tools/notebooks.py run 02_scenes 14  # the chosen ones (a name or a prefix)
    python tools/notebooks.py run --all         # every notebook, current or not
    python tools/notebooks.py status            # current / stale / unexecuted, size

Notebooks run one after another, each in a fresh kernel with the working directory nbs/,
one torch thread and the offline data beside the checkout when it exists. Figures are
stored as PNG at the dpi of tools/matplotlibrc (a notebook stays under about 1 MB). The
written file is what `nbdev_clean` leaves, so cleaning again changes nothing. Outputs
computed on the stand-in digits (no MNIST files) are refused, except in
01d_mnist_checks, which shows the stand-in on purpose.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
KEY = "sat_tutorial"  # the notebook metadata key of the stamp (settings.ini keeps it)
MAX_BYTES = 1_000_000  # about 1 MB per notebook
SKIP = re.compile(r"^#\|\s*(eval:\s*false|notest|slow)\s*$", re.M)  # as nbs/conftest.py
IMAGE = ("image/png", "image/svg+xml", "image/jpeg")
COMMAND = "make notebooks NB={name}"  # what a stale notebook's message tells to run


def source(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def code_hash(nb: dict) -> str:
    "The stamp: a hash of the code cells' sources, in order (no outputs, no prose)."
    sources = [source(c) for c in nb["cells"] if c["cell_type"] == "code"]
    return hashlib.sha256(json.dumps(sources).encode()).hexdigest()[:16]


def n_outputs(nb: dict) -> int:
    return sum(
        len(c.get("outputs", [])) for c in nb["cells"] if c["cell_type"] == "code"
    )


def has_outputs(nb: dict) -> bool:
    return n_outputs(nb) > 0


def images(nb: dict) -> int:
    "The figures a reader sees without running: image outputs stored in code cells."
    return sum(
        1
        for c in nb["cells"]
        if c["cell_type"] == "code"
        for o in c.get("outputs", [])
        if any(k in o.get("data", {}) for k in IMAGE)
    )


def status(path: Path) -> str:
    """'current' (stamped by the current code, its outputs stored), 'stale' (stamped by
    older code, or outputs without a stamp, or a stamp whose outputs were cleared) or
    'unexecuted' (no stamp and no outputs)."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    stamp = nb.get("metadata", {}).get(KEY, {})
    if "code_hash" not in stamp:
        return "stale" if has_outputs(nb) else "unexecuted"
    same = stamp["code_hash"] == code_hash(nb) and stamp.get("outputs") == n_outputs(nb)
    return "current" if same else "stale"


def notebooks(names=()) -> list[Path]:
    "The notebooks named (a stem, a file name or a prefix such as `14`), in order."
    every = sorted(p for p in NBS.glob("[0-9]*.ipynb"))
    if not names:
        return every
    chosen = []
    for n in names:
        stem = Path(n).name.removesuffix(".ipynb")
        hits = [p for p in every if p.stem == stem] or [
            p for p in every if p.stem.startswith(stem)
        ]
        if not hits:
            raise SystemExit(f"tools/notebooks.py: no notebook nbs/{stem}*.ipynb")
        chosen += [p for p in hits if p not in chosen]
    return sorted(chosen)


STANDIN = "stand-in digits"  # what the package says when it draws MNIST's stand-in
TEACHES_STANDIN = {
    "01d_mnist_checks"
}  # the notebook that shows the stand-in on purpose


def on_standin(nb: dict) -> bool:
    "Whether any output of `nb` says that its digits were the offline stand-in."
    return any(
        STANDIN in source({"source": o.get("text", "")})
        for c in nb["cells"]
        if c["cell_type"] == "code"
        for o in c.get("outputs", [])
    )


def kernel_env() -> dict:
    "The environment of the kernels: figures inline, small PNGs, one thread, the data."
    env = dict(os.environ)
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    env["MATPLOTLIBRC"] = str(ROOT / "tools" / "matplotlibrc")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("PYTHONHASHSEED", "0")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p]
    )
    shared = ROOT.parent / "shared" / "data"
    if "SAT_TUTORIAL_DATA" not in env and shared.is_dir():
        env["SAT_TUTORIAL_DATA"] = str(shared)
    return env


def execute(path: Path, timeout: int = 900) -> dict:
    "Run one notebook in a fresh kernel, stamp it, write it back; return its numbers."
    import nbformat
    from nbclient import NotebookClient
    from nbdev.clean import clean_nb
    from nbdev.sync import write_nb

    read = path.read_bytes()  # what runs; an edit made meanwhile must not be lost
    nb = nbformat.reads(read.decode("utf-8"), as_version=4)
    skipped = []
    for c in nb.cells:
        if c.cell_type == "code" and SKIP.search(c.source):
            c.metadata.setdefault("tags", []).append("skip-execution")
            skipped.append(c)
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(kernel_env())  # the kernel inherits this process's environment
    try:
        NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(NBS)}},
        ).execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    for c in skipped:
        c.metadata["tags"].remove("skip-execution")
        c.outputs = []
    nb = json.loads(nbformat.writes(nb))
    if path.stem not in TEACHES_STANDIN and on_standin(nb):
        raise RuntimeError(
            f"{path.name}: its outputs were computed on the {STANDIN}, not on MNIST; "
            "they are not stored. Put the MNIST files under $SAT_TUTORIAL_DATA "
            "(README.md, Data) and run it again"
        )
    nb["metadata"][KEY] = {"code_hash": code_hash(nb), "outputs": n_outputs(nb)}
    clean_nb(nb, False, [KEY], None, True)  # what nbdev_clean does with settings.ini
    if path.read_bytes() != read:  # edited while it ran: writing would undo the edit
        raise RuntimeError(
            f"{path.name} changed on disk while it ran; its outputs are not stored "
            "(the edit is kept): run it again"
        )
    write_nb(nb, path)
    return {"figures": images(nb), "bytes": path.stat().st_size}


def run(paths: list[Path], force: bool, timeout: int) -> int:
    todo = [p for p in paths if force or status(p) != "current"]
    print(f"notebooks: {len(todo)} to execute of {len(paths)} chosen", flush=True)
    failed, big, t_all = [], [], time.perf_counter()
    for i, p in enumerate(todo, 1):
        print(f"[{i}/{len(todo)}] {p.stem} ...", end=" ", flush=True)
        t0 = time.perf_counter()
        try:
            r = execute(p, timeout)
        except Exception as e:  # a failing cell: report it, keep the file, go on
            first = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip().splitlines()
            print(f"FAILED after {time.perf_counter() - t0:.0f} s", flush=True)
            print("    " + "\n    ".join(first[-6:]), flush=True)
            failed.append(p.stem)
            continue
        over = r["bytes"] > MAX_BYTES
        big += [p.stem] if over else []
        print(
            f"{time.perf_counter() - t0:.0f} s, {r['figures']} figures, "
            f"{r['bytes'] / 1e3:.0f} kB{'  OVER 1 MB' if over else ''}",
            flush=True,
        )
    print(f"notebooks: done in {time.perf_counter() - t_all:.0f} s", flush=True)
    if failed:
        print(f"notebooks: failed (file left as it was): {' '.join(failed)}")
    if big:
        print(f"notebooks: over {MAX_BYTES / 1e6:.0f} MB: {' '.join(big)}")
    return 1 if failed or big else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="execute notebooks and store their outputs")
    r.add_argument("names", nargs="*", help="notebooks (stem or prefix); default: all")
    r.add_argument("--all", action="store_true", help="also those already current")
    r.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    s = sub.add_parser("status", help="which notebooks' outputs are current")
    s.add_argument("names", nargs="*")
    a = ap.parse_args(argv)
    paths = notebooks(a.names)
    if a.cmd == "status":
        for p in paths:
            print(f"{p.stem:32} {status(p):10} {p.stat().st_size / 1e3:8.0f} kB")
        return 0
    return run(paths, force=a.all or bool(a.names), timeout=a.timeout)


if __name__ == "__main__":
    sys.exit(main())
