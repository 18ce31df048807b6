"""Runs one submission inside the sandbox (assignments/sandbox.py); the grader imports
only its seeding (`mix`, `seeding`). It reads its job (JSON) from stdin: the notebook's
code cells in order, where each part is checked, the grading run's seed, which package
functions the student may not call, and for each part the file of its calls
(`/in/<part>.pt`, made by the grader). A file of calls is data only (read with
`torch.load(..., weights_only=True)`: lists, tuples, dicts, tensors, numbers, strings):
a list of steps, each a dict with one of these keys (grading.py writes them):

- `call`: call the student's function of that name with `args` and `kwargs`; with
  `catch`, an exception it raises is a result (`["raised", class, first line]`, or
  `["returned", value]`) instead of the part's error;
- `build`: a class of the package or of `torch.nn` (`module:qualname`) made from
  `args`, `kwargs`, a state dict (`state`) and `eval`: a model, or an output record;
- `leaf`: a copy of the tensor given that requires a gradient;
- `grad`: the gradient of an earlier result (the sum of its elements, or with `each`
  every element apart) with respect to the leaves at the steps `wrt`;
- `files`: a fresh folder holding the given {file name: text}; its path.

An argument `{"__ref__": i, "path": [k, ...]}` stands for the result of step i (indexed
by k, ...). The check itself (its code, the inputs it keeps for the comparison, the
expected outputs) stays with the grader. Only a part that runs with no student code at
all (`alone`, A7's run: its checkpoint is loaded here, not in the grader) sends its
code, a `probe()` run in a sandbox of its own.

It executes the cells in one namespace, makes each part's calls right after that
part's test cell, and appends one JSON line per event to /out/events.jsonl: a cell
starts, a cell ends (its output, its error), a part's results return (by value: tensors
as dtype, shape and numbers; the results of `call` and `grad` steps, None for the
others) or it raises.

Nothing here decides a grade: the grader compares the results with those of the
instructor's solution, in its own process. A cell that ignores the time limit or ends
the process is dealt with by the grader (it kills the sandbox and starts it again
without that cell)."""

from __future__ import annotations

import builtins
import functools
import hashlib
import importlib
import io
import json
import math
import os
import signal
import sys
import time
import types

_exec, _compile = exec, compile  # bound before the student's code can replace them
BUILTINS = dict(builtins.__dict__)  # the probes' builtins, whatever the student patches
MAX_TEXT = 20_000  # characters of output kept per cell
MAX_NUMBERS = 5_000_000  # numbers a probe may return


class CellTimeout(BaseException):
    "The per-cell time limit (a BaseException: `except Exception` cannot eat it)."


class ForbiddenCall(Exception):
    "The student called the package's implementation of what they are asked to write."


class Capped(io.TextIOBase):
    "A text stream that keeps the first MAX_TEXT characters written to it."

    def __init__(self):
        self.parts, self.size = [], 0

    def writable(self):
        return True

    def write(self, s):
        s = str(s)
        if self.size < MAX_TEXT:
            self.parts.append(s[: MAX_TEXT - self.size])
        self.size += len(s)
        return len(s)

    def text(self):
        more = self.size - MAX_TEXT
        return "".join(self.parts) + (
            f"\n[… {more} more characters]" if more > 0 else ""
        )


def _timeout(signum, frame):
    raise CellTimeout()


def _package_caller(frame) -> bool:
    "Whether the first caller outside torch and the standard wrappers is the package."
    while frame is not None:
        name = frame.f_globals.get("__name__", "") or ""
        if not name.startswith(("torch", "functools", "contextlib")):
            return name == "sat_tutorial" or name.startswith("sat_tutorial.")
        frame = frame.f_back
    return False


def _guard(orig, name: str):
    @functools.wraps(orig)
    def guarded(*args, **kwargs):
        if _package_caller(sys._getframe(1)):
            return orig(*args, **kwargs)
        raise ForbiddenCall(
            f"{name} is the package's implementation of what this part asks you to "
            "write: you may not call it here (see the assignment's first cell)"
        )

    return guarded


def forbid(entries: list[str]) -> None:
    """Replace each `module:qualname` (a function, or a method of a class) by a guard
    that refuses calls that do not come from the package itself, everywhere the
    package's modules hold it."""
    for entry in entries:
        mod_name, qual = entry.split(":")
        mod = importlib.import_module(mod_name)
        *outer, last = qual.split(".")
        owner = mod
        for part in outer:
            owner = getattr(owner, part)
        raw = owner.__dict__[last] if isinstance(owner, type) else getattr(owner, last)
        if isinstance(raw, staticmethod):
            new = staticmethod(_guard(raw.__func__, entry))
        elif isinstance(raw, classmethod):
            new = classmethod(_guard(raw.__func__, entry))
        else:
            new = _guard(raw, entry)
        setattr(owner, last, new)
        if owner is mod:
            for other in list(sys.modules.values()):
                name = getattr(other, "__name__", "") or ""
                if name.startswith("sat_tutorial") and getattr(other, last, 0) is raw:
                    setattr(other, last, new)


def encode(x, budget: list[int]):
    "A probe's output as JSON: tensors by value, containers recursively."
    import torch

    if isinstance(x, torch.Tensor):
        t = x.detach().as_subclass(torch.Tensor).cpu()
        budget[0] -= t.numel()
        if budget[0] < 0:
            raise ValueError("the outputs are too large to compare")
        return {
            "__tensor__": str(t.dtype).replace("torch.", ""),
            "shape": list(t.shape),
            "data": t.flatten().tolist(),
        }
    if x is None or type(x) in (bool, int, float, str):
        return x
    if type(x) in (list, tuple):
        return [encode(v, budget) for v in x]
    if type(x) is dict:
        return {"__dict__": [[str(k), encode(v, budget)] for k, v in x.items()]}
    return {"__repr__": type(x).__name__}


class Events:
    "Appends one JSON line per event to the out file (kept open from the start)."

    def __init__(self, path: str):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def __call__(self, **event) -> None:
        os.write(self.fd, (json.dumps(event) + "\n").encode())


LIMIT = [0.0]


def mix(seed: int, key) -> int:
    """A seed in [0, 2³¹) derived from the grading run's seed and `key` (a probe's own
    number, or its part's name): every probe input follows from the seed the grader
    draws when it starts, so answers computed ahead for other inputs fail."""
    digest = hashlib.sha256(f"{int(seed)}:{key}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def seeding(seed: int):
    """The probes' `seed_everything(n)` (seeds every generator from the grading seed
    and n, not from n alone) and `fresh_seed(n)` (such a seed, for a function that
    takes one: A7's scenes)."""
    from sat_tutorial.core import seed_everything

    def seeded(n=0) -> int:
        return seed_everything(mix(seed, n))

    return seeded, functools.partial(mix, seed)


def need(ns: dict, name: str):
    "The student's function `name`, or a NameError that says it is not defined."
    if not callable(ns.get(name)):
        raise NameError(f"your function {name} is not defined (did its cell run?)")
    return ns[name]


def _error(e: BaseException) -> list[str]:
    if isinstance(e, CellTimeout):
        return ["Timeout", f"stopped by the per-cell time limit ({LIMIT[0]:g} s)"]
    try:  # the first line only: the grader keeps no more of it (grading.first_line)
        lines = str(e).splitlines()
        msg = " ".join(lines[0].split())[:120] if lines else ""
    except BaseException:
        msg = ""
    return [str(type(e).__name__)[:60], msg]


def _build(spec: dict, value):
    "An object of a class of the package or of torch.nn, made from data (`build`)."
    import torch

    mod_name, qual = str(spec["build"]).split(":")
    if not (mod_name + ".").startswith(("sat_tutorial.", "torch.nn.")):
        raise ValueError(
            f"the calls build the package's and torch.nn's classes only: {mod_name}"
        )
    cls = importlib.import_module(mod_name)
    for attr in qual.split("."):
        cls = getattr(cls, attr)
    if not isinstance(cls, type):
        raise TypeError(f"{spec['build']} is not a class")
    obj = cls(*value(spec.get("args", ())), **value(spec.get("kwargs", {})))
    if spec.get("state") is not None:
        obj.load_state_dict(value(spec["state"]))
    if spec.get("eval"):
        obj.eval()
    if isinstance(obj, torch.nn.Module):
        obj.requires_grad_(False)  # no gradient is asked of it: calls build no graph
    return obj


def _files(spec: dict) -> str:
    "A fresh folder holding the files of a `files` step: {name: text}; its path."
    import tempfile

    folder = tempfile.mkdtemp(prefix="files-")
    for name, text in spec["files"].items():
        if not name or name in (".", "..") or "/" in name or "\0" in name:
            raise ValueError(f"not a file name: {name!r}")
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(text)
    return folder


def _grad(out, leaves: list, each: bool) -> list:
    """The gradient of `out` (of the sum of its elements, or of each element apart:
    a Jacobian, one row per element) with respect to `leaves`; zeros where it does not
    depend on one."""
    import torch

    if not isinstance(out, torch.Tensor):
        raise TypeError(
            f"a tensor was expected to differentiate, got a {type(out).__name__}"
        )
    rows = list(out.reshape(-1)) if each else [out.sum()]
    grads = [[] for _ in leaves]
    for row in rows:
        got = (
            torch.autograd.grad(row, leaves, retain_graph=True, allow_unused=True)
            if row.requires_grad
            else [None] * len(leaves)
        )
        for k, (g, leaf) in enumerate(zip(got, leaves)):
            grads[k].append(torch.zeros_like(leaf) if g is None else g)
    if each:
        return [
            torch.stack(g) if g else leaf.new_zeros((0, *leaf.shape))
            for g, leaf in zip(grads, leaves)
        ]
    return [g[0] for g in grads]


def execute(plan: list, ns: dict) -> list:
    """Run a part's steps (see the top of this file) with the student's namespace `ns`;
    the results of its `call` and `grad` steps, None for the others, in order."""
    import torch

    results = []

    def value(x):
        if type(x) is dict and "__ref__" in x:
            got = results[x["__ref__"]]
            for k in x.get("path", ()):
                got = got[k]
            return got
        if type(x) in (list, tuple):
            return type(x)(value(v) for v in x)
        if type(x) is dict:
            return {k: value(v) for k, v in x.items()}
        if isinstance(x, torch.Tensor):
            return x.clone()  # every call gets its own copy of its inputs
        return x

    for step in plan:
        if "call" in step:
            fn = need(ns, step["call"])
            args, kwargs = value(step.get("args", ())), value(step.get("kwargs", {}))
            if step.get("catch"):
                try:
                    got = ["returned", fn(*args, **kwargs)]
                except Exception as e:  # the result the check asks for
                    got = ["raised", *_error(e)]
            else:
                got = fn(*args, **kwargs)
        elif "build" in step:
            got = _build(step, value)
        elif "leaf" in step:
            got = step["leaf"].detach().clone().requires_grad_(True)
        elif "grad" in step:
            leaves = [results[i] for i in step["wrt"]]
            got = _grad(value(step["grad"]), leaves, bool(step.get("each")))
        elif "files" in step:
            got = _files(step)
        else:
            raise ValueError(f"a step the runner does not know: {sorted(step)}")
        results.append(got)
    return [
        r if ("call" in step or "grad" in step) else None
        for r, step in zip(results, plan)
    ]


def _no_submission_on_path() -> None:
    """Neither the current folder (the submission) nor anything under it is on sys.path:
    the student's files are read as data, never imported by name by accident (the
    sandbox also starts Python with -s and PYTHONSAFEPATH=1)."""
    sys.path[:] = [
        p
        for p in sys.path
        if p not in ("", ".") and not os.path.abspath(p).startswith("/submission")
    ]


def main() -> int:
    _no_submission_on_path()
    job = json.loads(sys.stdin.read())
    emit = Events(job.get("events", "/out/events.jsonl"))
    limit = LIMIT[0] = float(job["limit"])
    import torch  # before the student's code: the calls use this torch

    torch.set_num_threads(1)
    seed_everything, fresh_seed = seeding(int(job["seed"]))
    forbid(job.get("forbid", []))
    signal.signal(signal.SIGALRM, _timeout)
    main_mod = types.ModuleType("__main__")
    ns = main_mod.__dict__
    ns["__builtins__"] = builtins
    sys.modules["__main__"] = main_mod
    real_out, real_err = sys.stdout, sys.stderr
    skip, done = set(job.get("skip", [])), set(job.get("done", []))
    at, plans = job.get("check_at", {}), job.get("calls", {})  # part: its file
    alone = job.get("alone", {})  # part: its probe's code, never with student code
    if alone and (job["cells"] or plans):
        raise ValueError("a probe runs only in a sandbox without the student's code")

    def timed(fn, what: str):
        signal.setitimer(signal.ITIMER_REAL, limit)
        try:
            return fn()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def run_part(part: str, run) -> None:
        """Run one graded part's `run` under the time limit with its output captured;
        emit its result by value, or its error."""
        emit(start_part=part)
        out = Capped()
        sys.stdout = sys.stderr = out
        try:
            emit(part=part, result=timed(lambda: encode(run(), [MAX_NUMBERS]), part))
        except BaseException as e:  # the student's code may raise anything
            emit(part=part, error=_error(e), stdout=out.text())
        finally:
            sys.stdout, sys.stderr = real_out, real_err

    shared = {}  # what one probe leaves for the next (A7's evaluation of its run)

    def probe(part: str):
        "A part that needs no student code (A7's run): its check's `probe()`."
        g = {
            "shared": shared,
            "__name__": "check",
            "__builtins__": BUILTINS,
            "torch": torch,
            "math": math,
            "seed_everything": seed_everything,
            "fresh_seed": fresh_seed,
        }

        def run():
            seed_everything(f"part {part}")  # a probe that does not seed itself
            _exec(_compile(alone[part], f"<check {part}>", "exec"), g)
            return g["probe"]()

        run_part(part, run)

    def run_calls(part: str, path: str):
        """A part's calls (steps: `execute`) from the grader's file `path`; their
        results, by value, in order."""

        def run():
            # a function of the student's that draws random numbers draws these
            seed_everything(f"part {part}")
            return execute(torch.load(path, weights_only=True), ns)

        run_part(part, run)

    for part in sorted(alone):
        if part not in done:
            probe(part)
    for i, cell in enumerate(job["cells"]):
        if i not in skip:
            emit(start=i)
            out, err = Capped(), Capped()
            sys.stdout, sys.stderr = out, err
            error = None
            t0 = time.perf_counter()
            try:
                code = _compile(cell["source"], f"<cell {cell['id']}>", "exec")
                timed(lambda: _exec(code, ns), cell["id"])
            except BaseException as e:  # SystemExit, KeyboardInterrupt included
                error = _error(e)
            finally:
                sys.stdout, sys.stderr = real_out, real_err
            emit(
                cell=i,
                stdout=out.text(),
                stderr=err.text(),
                error=error,
                seconds=round(time.perf_counter() - t0, 3),
            )
        for part in at.get(str(i), []):
            if part not in done:
                run_calls(part, plans[part])
    emit(end=True)
    os._exit(0)  # threads the student started do not keep the sandbox alive


if __name__ == "__main__":
    sys.exit(main())
