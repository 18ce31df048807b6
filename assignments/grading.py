"""Grade a submission outside the student's reach.

1. The notebook that runs is rebuilt from the release: every read-only cell (given code,
   visible tests) comes from the instructor's notebook, in its order; the student's
   solution cells are taken by their grade id, and cells the student added are kept
   where they were.
2. It runs in a sandbox (sandbox.py, runner.py): its own process, no network, no view of
   the course folder, with memory, CPU and time limits. After each part's visible test
   cell the part's *calls* are made there: the check, in this process, built them
   (`make_calls`: which of the student's functions to call, on which fresh inputs) and
   the sandbox reads them as data; what the functions return comes back by value. The
   check's code, what it keeps (inputs, expected outputs) and the solution's outputs
   never enter the student's process.
3. The same calls are made once per assignment on the instructor's solution, in another
   sandbox; this process compares the two. A part scores its points when its
   comparison passes, and 0 otherwise: nothing the submission defines, redefines or
   swallows takes part in the comparison. Visible tests only teach.
4. A cell that raises, ignores the time limit, or ends the process loses only what
   depends on it: the sandbox is started again without that cell.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import sandbox

HERE = Path(__file__).resolve().parent
STARTUP = 240.0  # seconds for the sandbox to start Python and import torch
GRACE = 5.0  # seconds past the cell limit before the grader kills the sandbox
MEMORY_MIB = 6144  # address space of the sandbox (torch alone maps ~2 GiB)
MAX_EVENTS = 64 << 20  # bytes of events read back (the rest is ignored)
MAX_TEXT = 20_000  # characters of a cell's output kept from an event
MIB = 1 << 20
MAX_NOTEBOOK = 64 * MIB  # bytes of a submitted notebook (outputs included)
ALONE_LIMIT = 300.0  # seconds for a probe without student code (A7 evaluates its run)


class Tampered(RuntimeError):
    "What the sandbox left for the grader (its events file) is not what runner.py writes."


def _meta(cell) -> dict:
    "A cell's nbgrader metadata, or {} when the cell, its metadata or it is malformed."
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    nbg = meta.get("nbgrader") if isinstance(meta, dict) else None
    return nbg if isinstance(nbg, dict) else {}


def _gid(cell: dict):
    gid = _meta(cell).get("grade_id")
    return gid if isinstance(gid, str) else None


def _text(src) -> str:
    if isinstance(src, list):
        return "".join(x for x in src if isinstance(x, str))
    return src if isinstance(src, str) else ""


def load_source(root: Path, name: str) -> tuple[list[dict], dict]:
    "The instructor's notebook cells and the assignment's checks (checks.json)."
    folder = root / "source" / name
    nb = json.loads((folder / f"{name}.ipynb").read_text(encoding="utf-8"))
    checks = json.loads((folder / "checks.json").read_text(encoding="utf-8"))
    return nb["cells"], checks


def not_plain(folder: Path, name: str) -> str | None:
    """One line when the submission `folder` (submitted/<student>/<name>), its student's
    folder or anything inside holds a symbolic link or a special file (a pipe, a
    socket, a device), None otherwise. Checked with lstat before anything reads the
    submission: a link to the instructor's notebook or to a classmate's is never
    followed, a pipe never blocks the copy into the sandbox."""
    student = folder.parent
    where = f"{student.name}/{name}"
    for p in (student, folder):
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            return None  # nothing there: the caller says what is missing
        if stat.S_ISLNK(st.st_mode):
            what = "your folder" if p == student else f"the folder {where}"
            return (
                f"{what} is a symbolic link: submit the files themselves (links "
                "are not graded)"
            )
    if not stat.S_ISDIR(os.lstat(folder).st_mode):
        return None
    for top, dirs, files in os.walk(folder, followlinks=False):
        for entry in sorted(dirs + files):
            path = Path(top) / entry
            mode = os.lstat(path).st_mode
            rel = f"{where}/{path.relative_to(folder).as_posix()}"
            if stat.S_ISLNK(mode):
                return (
                    f"{rel} is a symbolic link: submit the file itself (links are "
                    "not graded)"
                )
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                return f"{rel} is not a regular file (a pipe, socket or device)"
    return None


def read_submission(folder: Path, name: str) -> tuple[dict | None, str | None]:
    "The submitted notebook of `folder`, or None and one line saying what is wrong."
    where = f"{folder.parent.name}/{name}"
    nb_path = folder / f"{name}.ipynb"
    if not nb_path.is_file():
        found = sorted(
            p.relative_to(folder).as_posix() for p in folder.rglob("*.ipynb")
        )
        if not found:
            what = "is empty" if not any(folder.iterdir()) else "holds no notebook"
            return None, f"{where} {what}: submit {name}.ipynb in it"
        if any("/" in f for f in found) and any(
            f.endswith(f"{name}.ipynb") for f in found
        ):
            nested = next(f for f in found if f.endswith(f"{name}.ipynb"))
            return None, (
                f"{where}: the notebook is in a nested folder ({nested}): "
                f"move it up to {where}/{name}.ipynb"
            )
        return None, (
            f"{where}: no {name}.ipynb (found {', '.join(found[:3])}): "
            f"rename the notebook to {name}.ipynb"
        )
    size = nb_path.stat().st_size
    if size > MAX_NOTEBOOK:
        return None, (
            f"{where}/{name}.ipynb is {size / MIB:.0f} MiB, over the "
            f"{MAX_NOTEBOOK / MIB:.0f} MiB a notebook may have: clear its outputs"
        )
    try:
        nb = json.loads(nb_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return None, f"{where}/{name}.ipynb is not a notebook (not JSON: {e})"
    except RecursionError:
        return None, f"{where}/{name}.ipynb is not a notebook (JSON nested too deep)"
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        if isinstance(nb, dict) and "worksheets" in nb:
            return None, (
                f"{where}/{name}.ipynb is nbformat {nb.get('nbformat')}: open and save "
                "it in Jupyter (nbformat 4) and submit that"
            )
        return None, f"{where}/{name}.ipynb is not a notebook (no list of cells)"
    if nb.get("nbformat") != 4:
        return None, (
            f"{where}/{name}.ipynb is nbformat {nb.get('nbformat')}, not 4: open and "
            "save it in Jupyter and submit that"
        )
    return nb, None


def assemble(source: list[dict], student: dict | None) -> tuple[list[dict], list[str]]:
    """The code cells to run: read-only cells from `source`, solution cells by grade id
    from `student`, cells the student added kept after the cell they followed; and the
    solution cells missing from the submission. Of several cells with one grade id
    (Jupyter's copy and paste keeps it) the first counts; `duplicates` names them."""
    known = {_gid(c): c for c in source if _gid(c)}
    solutions, added, last, seen = {}, {}, None, set()
    for c in _student_cells(student):
        if c.get("cell_type") != "code":
            continue
        gid = _gid(c)
        if gid in known:
            if gid in seen:
                continue  # a copy (Jupyter's copy and paste): the first one counts
            seen.add(gid)
        if gid in known and known[gid]["metadata"]["nbgrader"].get("solution"):
            solutions[gid] = _text(c.get("source", ""))
            last = gid
        elif gid in known:
            last = gid
        else:
            added.setdefault(last, []).append(_text(c.get("source", "")))
    cells, missing = [], []
    for k, src in enumerate(added.get(None, [])):
        cells.append({"id": f"added_{k}", "kind": "added", "source": src})
    for c in source:
        gid = _gid(c)
        if c.get("cell_type") != "code":
            continue
        meta = c["metadata"]["nbgrader"]
        if meta.get("solution"):
            if gid not in solutions:
                missing.append(gid)
                continue
            cells.append({"id": gid, "kind": "solution", "source": solutions[gid]})
        else:
            kind = "test" if meta.get("grade") else "given"
            cells.append({"id": gid, "kind": kind, "source": _text(c["source"])})
        for k, src in enumerate(added.get(gid, [])):
            cells.append({"id": f"{gid}_added_{k}", "kind": "added", "source": src})
    return cells, missing


def _student_cells(student) -> list[dict]:
    "The cells of a submitted notebook that are dicts, whatever else it holds."
    cells = student.get("cells", []) if isinstance(student, dict) else []
    return [c for c in cells if isinstance(c, dict)] if isinstance(cells, list) else []


def duplicates(source: list[dict], student) -> dict[str, int]:
    """{grade id: how many cells have it} for every grade id of `source` that more than
    one cell of the submission has (of code cells: those are what is graded)."""
    known = {_gid(c) for c in source if _gid(c)}
    count = {}
    for c in _student_cells(student):
        gid = _gid(c)
        if gid in known and c.get("cell_type") == "code":
            count[gid] = count.get(gid, 0) + 1
    return {g: n for g, n in count.items() if n > 1}


def solution_cells(source: list[dict]) -> list[dict]:
    "The instructor's notebook as a submission: solution markers dropped."
    marks = ("### BEGIN SOLUTION", "### END SOLUTION")
    out = []
    for c in source:
        c = json.loads(json.dumps(c))
        lines = _text(c.get("source", "")).splitlines()
        c["source"] = "\n".join(x for x in lines if x.strip() not in marks)
        out.append(c)
    return out


def _open_regular(path: Path) -> int | None:
    """A read-only, non-blocking descriptor of `path` when it is a regular file; None
    when it does not exist. A pipe, a link, a folder or a device raises Tampered: the
    grader never opens them (so a FIFO cannot block it, nor a link redirect it)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise Tampered(f"{path.name} was replaced by something other than a file")
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as e:  # ELOOP: it became a link between lstat and open
        raise Tampered(
            f"{path.name} cannot be opened as a file ({e.strerror})"
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Tampered(f"{path.name} was replaced by something other than a file")
    return fd


def _events(path: Path, offset: int, n_cells: int = 0, parts=()) -> tuple[list, int]:
    """The events in the complete lines of `path` from `offset` on, and the new offset.
    The file is written by the sandbox, so it is hostile input: a regular file only,
    read without blocking, at most MAX_EVENTS bytes in all, each line parsed defensively
    and checked against what runner.py writes (`_event`); a line that is not raises
    Tampered (the grader's events cannot be told from forged ones any more)."""
    if offset >= MAX_EVENTS:
        return [], offset
    fd = _open_regular(path)
    if fd is None:
        return [], offset
    try:
        chunks, want = [], MAX_EVENTS - offset
        while want > 0:
            try:
                b = os.pread(fd, min(want, 1 << 20), offset + sum(map(len, chunks)))
            except BlockingIOError:
                break
            if not b:
                break
            chunks.append(b)
            want -= len(b)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    end = data.rfind(b"\n") + 1
    out = []
    for line in data[:end].splitlines():
        try:
            ev = _event(json.loads(line), n_cells, parts)
        except Exception:  # ValueError, RecursionError (deep nesting), MemoryError
            ev = None
        if ev is None:  # runner.py never writes it: the student's code did
            raise Tampered(f"{path.name} holds a line the grader's runner never writes")
        out.append(ev)
    return out, offset + end


SHORT = 120  # characters of a student's exception message that feedback may carry
NAME = 60  # characters of an exception's class name


def first_line(s, n: int = SHORT) -> str:
    """The first line of a string the sandbox wrote (the student controls it): printable
    characters only (control, format and bidi characters become spaces), spaces
    collapsed, at most n characters. All that feedback keeps of a student's text."""
    lines = s.splitlines() if isinstance(s, str) else []
    line = "".join(ch if ch.isprintable() else " " for ch in (lines or [""])[0])
    return " ".join(line.split())[:n]


def _name(s) -> str:
    "An exception's class name from the sandbox: letters, digits, _ and . only."
    s = s if isinstance(s, str) else ""
    return "".join(
        ch for ch in s[:NAME] if ch.isascii() and (ch.isalnum() or ch in "_.")
    )


def _error_pair(err):
    """An event's [name, message], sanitised (the name an identifier, the message the
    first line, printable, at most SHORT characters); None when it is not a pair of
    strings."""
    if not (isinstance(err, list) and len(err) == 2):
        return None
    if not all(isinstance(x, str) for x in err):
        return None
    return [_name(err[0]) or "Error", first_line(err[1])]


def _index(x, n: int):
    return x if type(x) is int and 0 <= x < n else None


def _event(ev, n_cells: int, parts) -> dict | None:
    """`ev` when it has the shape of an event runner.py writes (a copy with its strings
    cleaned), None otherwise: {"start": i}, {"start_part": p}, {"cell": i, "stdout",
    "stderr", "error": None or [name, message], "seconds"}, {"part": p, "result": …} or
    {"part": p, "error": [name, message], "stdout"}, {"end": true}; i a cell index, p
    one of `parts`."""
    if not isinstance(ev, dict) or not ev:
        return None
    keys = set(ev)
    if keys == {"end"}:
        return {"end": True} if ev["end"] is True else None
    if keys == {"start"}:
        i = _index(ev["start"], n_cells)
        return None if i is None else {"start": i}
    if keys == {"start_part"}:
        p = ev["start_part"]
        return {"start_part": p} if isinstance(p, str) and p in parts else None
    if "cell" in ev and keys <= {"cell", "stdout", "stderr", "error", "seconds"}:
        i = _index(ev["cell"], n_cells)
        err = ev.get("error")
        if i is None or (err is not None and _error_pair(err) is None):
            return None
        if not all(isinstance(ev.get(k, ""), str) for k in ("stdout", "stderr")):
            return None
        return {
            "cell": i,
            "stdout": ev.get("stdout", "")[:MAX_TEXT],
            "stderr": ev.get("stderr", "")[:MAX_TEXT],
            "error": None if err is None else _error_pair(err),
        }
    if "part" in ev and isinstance(ev["part"], str) and ev["part"] in parts:
        if keys == {"part", "result"}:
            return {"part": ev["part"], "result": ev["result"]}
        if keys <= {"part", "error", "stdout"} and "error" in keys:
            err = _error_pair(ev["error"])
            return None if err is None else {"part": ev["part"], "error": err}
    return None


def ref(i: int, *path) -> dict:
    "In a check's calls: the result of step i (indexed by `path`), as an argument."
    return {"__ref__": int(i), "path": list(path)}


def call(name: str, *args, catch: bool = False, **kwargs) -> dict:
    """In a check's calls: call the student's function `name`; with `catch`, what it
    raises is a result (["raised", class, first line]; else ["returned", value])."""
    return {"call": name, "args": args, "kwargs": kwargs, "catch": bool(catch)}


BUILDS = ("sat_tutorial.", "torch.nn.")  # where the classes a check builds are


def build(cls, args=(), kwargs=None, state=None, eval=False) -> dict:
    """In a check's calls: an object of the class `cls` (the package's, or a torch.nn
    layer's) made in the sandbox
    from data: `cls(*args, **kwargs)`, with the state dict `state` (a module's: its
    parameters), in eval mode with `eval`."""
    if not (isinstance(cls, type) and cls.__module__.startswith(BUILDS)):
        raise TypeError(f"only the package's and torch.nn's classes are built: {cls!r}")
    return {
        "build": f"{cls.__module__}:{cls.__qualname__}",
        "args": tuple(args),
        "kwargs": dict(kwargs or {}),
        "state": None if state is None else dict(state),
        "eval": bool(eval),
    }


def leaf(t) -> dict:
    "In a check's calls: a copy of tensor `t` that requires a gradient."
    return {"leaf": t}


def grad(of: dict, wrt, each: bool = False) -> dict:
    """In a check's calls: the gradient of the result `of` (a `ref`) with respect to
    the leaves at steps `wrt`: of the sum of its elements, or with `each` of every
    element apart (a Jacobian, one row per element)."""
    return {"grad": of, "wrt": [int(i) for i in wrt], "each": bool(each)}


def files(texts: dict) -> dict:
    "In a check's calls: a fresh folder holding {file name: text}; its path."
    return {"files": {str(k): str(v) for k, v in texts.items()}}


STEPS = {"call", "build", "leaf", "grad", "files"}


def _data(x, n: int):
    """`x` as the data a file of calls may hold (torch.load with weights_only): tensors
    (detached copies), numbers, strings, None, and lists, tuples and dicts of them; a
    `ref` to one of the n steps before. Raises TypeError for anything else."""
    import torch

    if isinstance(x, torch.Tensor):
        return x.detach().as_subclass(torch.Tensor).clone()
    if x is None or type(x) in (bool, int, float, str):
        return x
    if isinstance(x, torch.Size):
        return tuple(x)
    if type(x) is dict and "__ref__" in x:
        if not (type(x["__ref__"]) is int and 0 <= x["__ref__"] < n):
            raise ValueError(f"a reference to step {x['__ref__']} from step {n}")
        return {"__ref__": x["__ref__"], "path": [_data(k, n) for k in x["path"]]}
    if type(x) in (list, tuple):
        return type(x)(_data(v, n) for v in x)
    if type(x) is dict and all(type(k) is str for k in x):
        return {k: _data(v, n) for k, v in x.items()}
    raise TypeError(f"a call's argument that is not data: a {type(x).__name__}")


def _step(step, n: int, kinds: list) -> dict:
    "Step n of a check's calls, checked and made data (a tuple is a plain call)."
    import torch

    if type(step) is tuple and len(step) == 3:  # (name, args, kwargs)
        name, args, kwargs = step
        step = call(name, *args, **kwargs)
    if not (type(step) is dict and len(STEPS & set(step)) == 1):
        raise ValueError(f"step {n} of the calls is not a step: {step!r:.80}")
    kind = (STEPS & set(step)).pop()
    if kind == "leaf" and not (
        isinstance(step["leaf"], torch.Tensor) and step["leaf"].is_floating_point()
    ):
        raise TypeError(f"step {n}: a leaf must be a floating-point tensor")
    if kind == "grad" and any(
        not 0 <= i < n or kinds[i] != "leaf" for i in step["wrt"]
    ):
        raise ValueError(
            f"step {n}: a gradient with respect to steps that are not leaves"
        )
    kinds.append(kind)
    return _data(step, n)


CHECK_GLOBALS = {"ref": ref, "call": call, "build": build, "leaf": leaf}
CHECK_GLOBALS |= {"grad": grad, "files": files}


def check_namespace(code: str, part: str, seed: int | None = None) -> dict:
    """The namespace a check's code runs in on the grader's side, after running it:
    the seeding of the grading run `seed` (the runner's), the helpers that write calls
    (`call`, `ref`, `build`, `leaf`, `grad`, `files`) and those that compare (`close`,
    `same`, `Mismatch`, `shown`, `first_line`)."""
    import builtins
    import math

    import torch

    import runner  # its seeding only: the same seeds as in the sandbox

    g = {"__name__": "check", "__builtins__": builtins, "torch": torch, "math": math}
    g |= CHECK_GLOBALS
    g |= {"close": close, "same": same, "Mismatch": Mismatch}
    g |= {"shown": shown, "first_line": first_line}
    if seed is not None:
        g["seed_everything"], g["fresh_seed"] = runner.seeding(seed)
    exec(compile(code, f"<check {part}>", "exec"), g)
    return g


def make_calls(checks: dict, seed: int, folder: Path) -> set[str]:
    """The calls of every part that runs with the student's code: its check's `calls()`
    run here, in the grader's process, with the grading seed (the runner's seeding),
    and its steps saved, as data, to `folder/<part>.pt`; the parts it saved. The
    sandbox gets only these files (read-only, at /in): the check's code, what it keeps
    for the comparison (inputs, expected outputs) and the solution's outputs never
    enter the student's process. The check's namespace after `calls()` stays in this
    process, in `checks["parts"][part]["kept"]`, where `score_parts` compares with it.
    Not thread-safe (it seeds the global generators): call it before grading."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    done = set()
    for part, spec in checks["parts"].items():
        if spec["alone"]:
            continue
        g = check_namespace(spec["code"], part, seed)
        if "calls" not in g or "outputs" not in g:
            raise ValueError(f"check {part} has no calls() and outputs(results)")
        g["seed_everything"](f"part {part}")
        kinds = []
        plan = [_step(s, n, kinds) for n, s in enumerate(g["calls"]())]
        torch.save(plan, folder / f"{part}.pt")
        spec["kept"] = g
        done.add(part)
    return done


def run(
    cells: list[dict],
    checks: dict,
    limit: float,
    files: Path | None = None,
    reference: bool = False,
    alone: bool = False,
    seed: int | None = None,
    calls: Path | None = None,
) -> dict:
    """Run `cells` in a sandbox and, after each part's test cell, that part's calls
    (the file `calls/<part>.pt` that make_calls wrote, read-only at /in: the check's
    code stays here); restart without a cell that ended the process or outlived the
    limit. With `alone`, run instead the probes of the parts that need no student code
    (A7's run), in a sandbox without the student's cells. Every input derives from
    `seed` (the grading run's: a submission and the solution it is compared with must
    get the same; None draws a fresh one). `reference`: the instructor's solution (no
    forbidden functions). Returns {"cells": {i: record},
    "parts": {part: {"result": …} or {"error": [name, message]}}}. Raises Tampered when
    the sandbox replaced its events file by something that is not a file."""
    parts = {p: c for p, c in checks["parts"].items() if c["alone"] == alone}
    if alone:
        limit = max(limit, ALONE_LIMIT)
        cells = []
    check_at = {}
    for i, c in enumerate(cells):
        if c["id"] in parts:
            check_at.setdefault(str(i), []).append(c["id"])
    placed = {p for ps in check_at.values() for p in ps}
    records, results = {}, {}
    if not alone:
        for p in set(parts) - placed:
            results[p] = {"error": ["Missing", "its test cell is missing"]}
        unplanned = [
            p for p in placed if calls is None or not (calls / f"{p}.pt").is_file()
        ]
        if unplanned:
            raise ValueError(f"no calls for {sorted(unplanned)}: run make_calls first")
    skip = set()
    job = {
        "cells": cells,
        "alone": {p: c["code"] for p, c in parts.items()} if alone else {},
        "calls": {p: f"/in/{p}.pt" for p in sorted(placed)},
        "check_at": check_at,
        "forbid": [] if reference else checks.get("forbid", []),
        "limit": limit,
        "seed": secrets.randbits(32) if seed is None else int(seed),
    }
    n_items = len(cells) + len(parts) + 2
    for _attempt in range(n_items):
        with tempfile.TemporaryDirectory(prefix="sat-grade-") as tmp:
            work, out = Path(tmp) / "work", Path(tmp) / "out"
            out.mkdir()
            if files is not None and files.is_dir():
                shutil.copytree(files, work, symlinks=True)
            else:
                work.mkdir()
            job["skip"], job["done"] = sorted(skip), sorted(results)
            culprit, why, log = _attempt_run(
                job, work, out, limit, n_items, calls if placed else None
            )
        for ev in log:  # every event has passed _event: its fields have their types
            if "cell" in ev:
                records[ev["cell"]] = ev
            elif "part" in ev and ev["part"] not in results:
                results[ev["part"]] = (
                    {"result": ev["result"]}
                    if "result" in ev
                    else {"error": ev["error"]}
                )
        if culprit is None:
            break
        kind, key = culprit
        if kind == "startup":
            for p in parts:
                results.setdefault(p, {"error": ["SandboxError", why]})
            break
        if kind == "cell":
            skip.add(key)
            records[key] = {"cell": key, "error": ["Killed", why], "stdout": ""}
        else:
            results[key] = {"error": ["Killed", why]}
        if all(p in results for p in parts):
            break
    for p in parts:
        results.setdefault(p, {"error": ["Killed", "the sandbox kept ending"]})
    return {"cells": records, "parts": results}


def deadline(limit: float, n_items: int) -> float:
    "Wall-clock seconds one sandbox run may take in all (enforced by a timer thread)."
    return STARTUP + (limit + GRACE) * n_items


def _attempt_run(job, work, out, limit, n_items, inputs=None):
    """One sandbox run: (culprit or None, why, events). Two threads watch it: the
    reader follows the events and kills the sandbox when an item outlives the limit;
    a timer kills it at `deadline` whatever the reader is doing, and a reader still
    stuck then is abandoned (Tampered)."""
    events = out / "events.jsonl"
    cmd = sandbox.command(
        sandbox.python(["/grader/runner.py"]),
        work,
        out,
        HERE / "runner.py",
        inputs=inputs,
    )
    err_path = out.parent / "stderr.txt"
    n_cells = len(job["cells"])
    parts = set(job.get("alone", {})) | set(job.get("calls", {}))
    hard = deadline(limit, n_items)
    state = {"log": [], "killed": None, "error": None}
    group = (
        sandbox.Cgroup.make(MEMORY_MIB) if sandbox.cgroup_problem() is None else None
    )
    try:
        with open(err_path, "wb") as err:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=err,
                preexec_fn=sandbox.limiter(
                    MEMORY_MIB, int(limit * n_items + STARTUP), group
                ),
                start_new_session=True,
            )
    except BaseException:
        if group is not None:
            group.close()
        raise

    def out_of_time():
        state["killed"] = state["killed"] or (
            f"stopped by the sandbox's wall-clock limit ({hard:g} s)"
        )
        _kill(proc)

    timer = threading.Timer(hard, out_of_time)
    timer.daemon = True
    timer.start()

    def follow():
        try:
            _follow(proc, events, limit, n_cells, parts, state)
        except BaseException as e:  # Tampered, or anything else: the grader decides
            state["error"] = e
            _kill(proc)

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    try:
        try:
            proc.stdin.write(json.dumps(job).encode())
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        reader.join(hard + GRACE)
        if reader.is_alive():  # the timer has killed the sandbox: give the reader
            reader.join(GRACE)  # a moment to see it, then leave it behind
        if reader.is_alive():
            raise Tampered(
                "the grader could not read the sandbox's events within its wall-clock "
                f"limit ({hard:g} s)"
            )
    finally:
        timer.cancel()
        _kill(proc)
        proc.wait()
        if group is not None:
            group.close()
    if state["error"] is not None:
        raise state["error"]
    log = state["log"]
    if any(ev.get("end") is True for ev in log):
        return None, "", log
    finished = set()
    for ev in log:
        if "cell" in ev:
            finished.add(("cell", ev["cell"]))
        if "part" in ev:
            finished.add(("part", ev["part"]))
    started = [
        ("cell", ev["start"]) if "start" in ev else ("part", ev["start_part"])
        for ev in log
        if "start" in ev or "start_part" in ev
    ]
    pending = [s for s in started if s not in finished]
    why = state["killed"] or _death(proc.returncode, err_path)
    if not pending:
        if log:  # the student's code may have run, and written the stderr: not shown
            return (
                ("startup", None),
                (f"the sandbox ended between two steps (exit code {proc.returncode})"),
                log,
            )
        return ("startup", None), _startup_problem(proc.returncode, err_path), log
    return pending[-1], why, log


def _follow(proc, events: Path, limit: float, n_cells: int, parts, state) -> None:
    "The reader: collect events into state['log']; kill an item past its time limit."
    log, offset, current, since = state["log"], 0, None, time.monotonic()
    while proc.poll() is None:
        time.sleep(0.1)
        new, offset = _read(events, offset, n_cells, parts)
        for ev in new:
            log.append(ev)
            if "start" in ev:
                current, since = ("cell", ev["start"]), time.monotonic()
            elif "start_part" in ev:
                current, since = ("part", ev["start_part"]), time.monotonic()
            elif "cell" in ev or "part" in ev:
                current, since = None, time.monotonic()
        budget = STARTUP if not log else limit + GRACE
        if current is None and log:
            budget = limit + GRACE  # between two items: the runner's own work
        if time.monotonic() - since > budget:
            state["killed"] = f"stopped by the per-cell time limit ({limit:g} s)"
            _kill(proc)
            break
    proc.wait()
    new, offset = _read(events, offset, n_cells, parts)
    log += new


_read = _events  # what the reader thread calls (a test replaces it by one that hangs)


def _kill(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass


def _tail(path: Path, n: int = 4096) -> str:
    "The last n bytes of a file the sandbox wrote (its stderr), as text."
    try:
        fd = _open_regular(path)
    except Tampered:
        return ""
    if fd is None:
        return ""
    try:
        size = os.fstat(fd).st_size
        return os.pread(fd, n, max(0, size - n)).decode(errors="replace")
    finally:
        os.close(fd)


def _death(code: int, err_path: Path) -> str:
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        return f"the process was killed by {name} (memory or CPU limit?)"
    tail = _tail(err_path)[-300:]
    if "MemoryError" in tail:
        return f"the process ran out of memory (limit {MEMORY_MIB} MiB)"
    return f"the process ended with exit code {code} (os._exit, exit or a crash)"


def _startup_problem(code, err_path: Path) -> str:
    "Why the sandbox did not start (before any of the student's code ran)."
    tail = _tail(err_path).strip()
    last = tail.splitlines()[-1] if tail else f"exit code {code}"
    return f"the sandbox did not start: {first_line(last, 200)}"


# ---- comparison (in the grader's process) ------------------------------------------


class Mismatch(AssertionError):
    "A part's outputs differ from the solution's."


def decode(x):
    "A part's results, back from JSON: tensors, dicts, lists."
    import torch

    if isinstance(x, dict) and "__tensor__" in x:
        dtype = getattr(torch, str(x["__tensor__"]), None)
        if not isinstance(dtype, torch.dtype):
            raise Mismatch(f"an output of unknown dtype {x['__tensor__']!r}")
        return torch.tensor(x["data"], dtype=dtype).reshape(x["shape"])
    if isinstance(x, dict) and "__dict__" in x:
        return {k: decode(v) for k, v in x["__dict__"]}
    if isinstance(x, dict) and "__repr__" in x:
        return f"<a {x['__repr__']}>"
    if isinstance(x, list):
        return [decode(v) for v in x]
    return x


def shown(x) -> str:
    """How a message shows a value the student's code returned: a number as itself,
    anything else by its kind only (its text never reaches feedback)."""
    if x is None or type(x) in (bool, int):
        return repr(x)
    if type(x) is float:
        return f"{x:.6g}"
    if isinstance(x, str):
        return f"a string of {len(x)} characters"
    import torch

    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)}"
    if isinstance(x, (list, dict)):
        return f"a {type(x).__name__} of {len(x)} items"
    return "a value of another kind"


def close(got, want, what: str, tol: float = 1e-5) -> None:
    "Assert that `got` has `want`'s shape and values, up to tol·(1 + max |want|)."
    import torch

    if not isinstance(got, torch.Tensor):
        try:
            got = torch.as_tensor(got)
        except (TypeError, ValueError, RuntimeError):
            raise Mismatch(f"{what}: a tensor was expected, got {shown(got)}") from None
    want = torch.as_tensor(want)
    if tuple(got.shape) != tuple(want.shape):
        raise Mismatch(
            f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
        )
    if not got.numel():
        return
    g, w = got.double(), want.double()
    if bool(torch.isnan(g).any()) and not bool(torch.isnan(w).any()):
        raise Mismatch(f"{what}: has NaN where the expected values are finite")
    both = torch.isfinite(g) & torch.isfinite(w)
    if not torch.equal(torch.isfinite(g), torch.isfinite(w)):
        raise Mismatch(f"{what}: infinite where the expected values are not")
    err = float((g - w)[both].abs().max()) if bool(both.any()) else 0.0
    scale = float(w[both].abs().max()) if bool(both.any()) else 0.0
    if err > tol * (1 + scale):
        raise Mismatch(f"{what}: off by up to {err:.3g} on the grader's inputs")


def same(got, want, what: str, tol: float = 1e-5) -> None:
    "Recursive comparison of outputs: tensors and floats close, the rest equal."
    import torch

    if isinstance(want, torch.Tensor) or isinstance(want, float):
        if isinstance(want, float) and type(got) in (int, float):
            if abs(got - want) > tol * (1 + abs(want)) or got != got:
                raise Mismatch(f"{what}: {got:.6g}, expected {want:.6g}")
            return
        close(got, want, what, tol)
    elif isinstance(want, dict):
        if not isinstance(got, dict):
            raise Mismatch(f"{what}: not a dict")
        for k, v in want.items():
            if k not in got:
                raise Mismatch(f"{what}: no {k!r}")
            same(got[k], v, k if what == "outputs" else f"{what} {k}", tol)
    elif isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            n = len(got) if isinstance(got, list) else "not a list"
            raise Mismatch(f"{what}: {n} items, expected {len(want)}")
        for k, (g, w) in enumerate(zip(got, want)):
            same(g, w, f"{what}[{k}]", tol)
    elif type(got) is not type(want) or got != want:
        raise Mismatch(f"{what}: {shown(got)}, expected {want!r:.80}")


def compare(part: str, spec: dict, got, want) -> None:
    """Compare a part's results `got` with the solution's `want` by its check's
    `compare(got, want)` (default: `same`); raises Mismatch. A part that runs with the
    student's code is compared in the namespace its `calls()` ran in (make_calls):
    `outputs(results)` names the results of its calls (the student's and the
    solution's alike), with the inputs and expected outputs `calls()` kept."""
    if spec["alone"]:
        g = check_namespace(spec["code"], part)
    elif "kept" in spec:
        g = spec["kept"]
    else:
        raise RuntimeError(f"check {part}: its calls were not made (make_calls)")
    fn = g.get("compare") or (lambda got, want: same(got, want, "outputs"))
    got, want = decode(got), decode(want) if want is not None else None
    if not spec["alone"]:
        if (
            not isinstance(got, list)
            or not isinstance(want, list)
            or len(got) != len(want)
        ):
            raise Mismatch("the calls returned something other than their results")
        got, want = g["outputs"](got), g["outputs"](want)
    fn(got, want)


def score_parts(checks: dict, points: dict, got: dict, want: dict) -> dict:
    "{part: (points earned, why it lost them or '')}."
    out = {}
    for part, spec in checks["parts"].items():
        mine = got.get(part, {"error": ["Missing", "not run"]})
        if "error" in mine:
            name, msg = (list(mine["error"]) + ["", ""])[:2]
            out[part] = (0.0, _explain(name, msg))
            continue
        ref = want.get(part) if not spec["alone"] else {"result": None}
        if ref is None or "error" in ref:
            raise RuntimeError(f"the instructor's solution fails check {part}: {ref}")
        try:
            compare(part, spec, mine["result"], ref["result"])
        except Mismatch as e:  # the grader's message, on one line all the same
            why = first_line(str(e), 240)
            out[part] = (0.0, why or "the outputs differ from the solution's")
        except Exception as e:  # a malformed output the comparison cannot read
            out[part] = (
                0.0,
                "unreadable outputs: not the kind of values the solution returns "
                f"({type(e).__name__} while comparing them)",
            )
        else:
            out[part] = (float(points[part]), "")
    return out


def _explain(name: str, msg: str) -> str:
    "A part's error as feedback shows it: the first line of the message, sanitised."
    name, msg = _name(name) or "Error", first_line(msg)
    if name in ("Timeout", "Killed", "Missing", "SandboxError"):
        return msg
    return f"your code raised {name}" + (f": {msg}" if msg else "")
