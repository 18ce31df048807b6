"""The package as a submission sees it while it is graded: a copy of `sat_tutorial` in
which every function and method on the assignment's stub list (the `# %% forbid`
section of `cells/<name>.py`, `forbid` in checks.json) has lost its body.

`build` copies the package to a folder and rewrites, with `ast`, each listed function:
its signature and decorators stay (so that classes still build and objects pickled by
the grader still load), its docstring and body are replaced by one `raise
NotImplementedError("<module>:<qualname> is not available while grading <name>")`.
The rest of each module is kept as it is, byte for byte; compiled files
(`__pycache__`) are not copied. The sandbox binds that copy read-only at
/pkg/sat_tutorial instead of the package (sandbox.py): reading the source
(`inspect.getsource`, the files under /pkg), unwrapping a guard, renaming the
notebook's module or calling from a package function then finds only the stub.
`course.py grade` builds one copy per assignment per grading run (`Stubbed`) and grades
every submission of that assignment with it; the instructor's solution, whose run only
computes what submissions are compared with, runs with the package itself.

`python assignments/stubs.py derive NAME` lists, for each graded part of an assignment,
the package functions whose output on the part's inputs reproduces what the solution
returns (`derive`); tests/test_grader_stubs.py fails when one of them is not on the
assignment's stub list.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE = "sat_tutorial"


# Functions on a stub list that keep their bodies, and why: a package class that the
# assignment's given cells and checks run calls them. They are still refused when the
# student's code calls them (runner.forbid), but a copy of their source, an unwrapped
# guard or a package frame reaches them. {assignment: {entry: why}}
KEEP = {
    "a4_ram": {
        "sat_tutorial.ram:gaussian_log_prob": "RAM.forward computes log π with it "
        "(and torch.distributions.Normal gives the same in one call anyway)",
    },
}


def stubbed_entries(assignment: str, entries) -> list[str]:
    "The entries of a stub list that `build` empties: all but those of KEEP."
    keep = KEEP.get(assignment, {})
    return [e for e in entries if e not in keep]


def message(entry: str, assignment: str) -> str:
    "What a stub raises: one line naming the function and the assignment."
    return f"{entry} is not available while grading {assignment}"


def _targets(tree: ast.Module) -> dict[str, ast.AST]:
    "{qualname: node} of every function and method of a module (classes nested too)."
    found = {}

    def visit(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found[prefix + node.name] = node
            elif isinstance(node, ast.ClassDef):
                visit(node.body, prefix + node.name + ".")
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body, prefix)
                visit(getattr(node, "orelse", []), prefix)

    visit(tree.body, "")
    return found


def stub_source(source: str, module: str, quals, assignment: str) -> str:
    """`source` (the text of `module`) with each function of `quals` (qualnames)
    reduced to its signature, its decorators and one `raise NotImplementedError`; every
    other line unchanged. Raises LookupError for a qualname the module does not define
    (a stub list that no longer matches the package)."""
    tree = ast.parse(source)
    found = _targets(tree)
    missing = sorted(set(quals) - set(found))
    if missing:
        raise LookupError(
            f"{module} defines no {', '.join(missing)} (the stub list of {assignment} "
            "names a function the package does not have)"
        )
    lines = source.splitlines(keepends=True)
    spans = []
    for qual in quals:
        node = found[qual]
        fn = copy.deepcopy(node)  # decorators and signature as written
        text = message(f"{module}:{qual}", assignment)
        fn.body = [ast.parse(f"raise NotImplementedError({text!r})").body[0]]
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        new = textwrap.indent(ast.unparse(fn), " " * node.col_offset) + "\n"
        spans.append((first - 1, node.end_lineno, new))
    for start, end, new in sorted(spans, reverse=True):
        lines[start:end] = [new]
    out = "".join(lines)
    ast.parse(out)  # still a module
    return out


def by_module(entries) -> dict[str, list[str]]:
    "`module:qualname` entries grouped as {module: [qualname, …]}."
    out = {}
    for entry in entries:
        mod, _, qual = entry.partition(":")
        if not mod.startswith(PACKAGE) or not qual:
            raise ValueError(f"not a function of {PACKAGE}: {entry!r}")
        out.setdefault(mod, []).append(qual)
    return out


def _module_file(package: Path, module: str) -> Path:
    rel = Path(*module.split(".")[1:])
    path = package / rel.with_suffix(".py")
    return path if path.is_file() else package / rel / "__init__.py"


def build(assignment: str, entries, dest: Path, package: Path | None = None) -> Path:
    """Copy the package (default: the one the grader imports) to `dest`/sat_tutorial
    with every function of `entries` (`module:qualname`) stubbed, except those KEEP
    names for `assignment`; returns that folder.
    Files are copied, never linked (a link would lead out of the copy), and compiled
    files are left out: a `.pyc` of the package holds the bodies. The zoo's weights
    (`zoo/`, about 33 MB, which no assignment reads) are left out too."""
    if package is None:
        import sandbox

        package = sandbox.package_dir()
    package = Path(package)
    target = Path(dest) / PACKAGE
    shutil.copytree(
        package,
        target,
        ignore=lambda folder, names: (
            shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo")(folder, names)
            | ({"zoo"} if Path(folder) == package else set())
        ),
    )
    for module, quals in by_module(stubbed_entries(assignment, entries)).items():
        src = _module_file(package, module)
        if not src.is_file():
            raise LookupError(f"the stub list of {assignment} names {module}: no file")
        text = stub_source(src.read_text(encoding="utf-8"), module, quals, assignment)
        out = _module_file(target, module)
        out.write_text(text, encoding="utf-8")
    for p in sorted(target.rglob("*"), reverse=True):  # read-only, as it is bound
        os.chmod(p, 0o555 if p.is_dir() else 0o444)
    os.chmod(target, 0o555)
    return target


class Stubbed:
    """The stubbed copies of one grading run, one per assignment, built once when
    first asked for (thread-safe) and removed by `close`."""

    def __init__(self):
        import threading

        self.root = Path(tempfile.mkdtemp(prefix="sat-stubbed-"))
        self.built, self.lock = {}, threading.Lock()

    def get(self, assignment: str, entries) -> Path:
        with self.lock:
            if assignment not in self.built:
                self.built[assignment] = build(
                    assignment, entries, self.root / assignment
                )
            return self.built[assignment]

    def close(self) -> None:
        for p in self.root.rglob("*"):
            if not p.is_symlink():
                os.chmod(p, 0o755 if p.is_dir() else 0o644)
        shutil.rmtree(self.root, ignore_errors=True)


# ---- the stub list derived from the assignment -------------------------------------


class _Anything:
    "A stand-in for whatever a method reads from `self` that the call does not hold."

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __call__(self, *args, **kwargs):
        return self

    def __iter__(self):
        return iter(())


class _StandIn:
    "A stand-in `self`: the call's arguments by name, their submodules, else _Anything."

    def __init__(self, attrs: dict):
        self.__dict__.update(attrs)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()


def _fresh(x):
    "A copy of a call's argument, so that a function that changes it changes no other."
    import torch

    if isinstance(x, torch.Tensor):
        return x.detach().clone().requires_grad_(x.requires_grad and x.is_leaf)
    if isinstance(x, tuple):
        return tuple(_fresh(v) for v in x)
    if isinstance(x, list):
        return [_fresh(v) for v in x]
    if isinstance(x, dict):
        return {k: _fresh(v) for k, v in x.items()}
    try:
        return copy.deepcopy(x)
    except Exception:
        return x


def _leaves(x, depth: int = 0) -> list:
    "The tensors, floats and lists of ints inside an output (containers, records)."
    import torch

    if depth > 6:
        return []
    if isinstance(x, torch.Tensor):
        return [x.detach()]
    if type(x) is float:
        return [x]
    if isinstance(x, (list, tuple)):
        if len(x) >= 2 and all(type(v) is int for v in x):
            return [list(x)]
        return [leaf for v in x for leaf in _leaves(v, depth + 1)]
    if isinstance(x, dict):
        return [leaf for v in x.values() for leaf in _leaves(v, depth + 1)]
    if hasattr(x, "__dataclass_fields__") or hasattr(x, "_asdict"):
        fields = x._asdict() if hasattr(x, "_asdict") else vars(x)
        return [leaf for v in fields.values() for leaf in _leaves(v, depth + 1)]
    return []


def _same(a, b) -> bool:
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if tuple(a.shape) != tuple(b.shape) or not a.numel():
            return False
        if a.dtype == torch.bool or b.dtype == torch.bool:
            return bool(torch.equal(a, b))
        a, b = a.double(), b.double()
        if not bool(torch.isfinite(a).all()) or not bool(torch.isfinite(b).all()):
            return bool(torch.equal(a, b))
        return float((a - b).abs().max()) <= 1e-5 * (1 + float(b.abs().max()))
    if type(a) is float and type(b) is float:
        return abs(a - b) <= 1e-6 * (1 + abs(b))
    if isinstance(a, list) and isinstance(b, list):
        return a == b
    return False


def _informative(leaf, inputs) -> bool:
    """A leaf of the solution's output that only a function computing the answer
    returns: not constant, not round, not one of the call's inputs."""
    import torch

    if isinstance(leaf, torch.Tensor):
        flat = leaf.flatten()
        if flat.numel() < 2 or bool((flat == flat[0]).all()):
            return False
        return not any(_same(x, leaf) for x in inputs)
    if type(leaf) is float:
        return (
            leaf == leaf
            and leaf != round(leaf)
            and not any(_same(x, leaf) for x in inputs)
        )
    return isinstance(leaf, list) and len(set(leaf)) > 1


def candidates():
    """Every function and method the package defines, once each: [(entry, function,
    the class it is defined in or None)]."""
    import importlib
    import inspect
    import pkgutil

    pkg = importlib.import_module(PACKAGE)
    out, seen = [], set()
    for info in sorted(pkgutil.walk_packages(pkg.__path__, PACKAGE + ".")):
        if info.name.endswith("__main__"):
            continue
        try:
            mod = importlib.import_module(info.name)
        except Exception:
            continue
        for _, obj in sorted(vars(mod).items()):
            if getattr(obj, "__module__", None) != info.name:
                continue
            if inspect.isfunction(obj):
                items = [(obj.__qualname__, obj, None)]
            elif inspect.isclass(obj):
                items = []
                for name, raw in vars(obj).items():
                    fn = raw
                    if isinstance(raw, (staticmethod, classmethod)):
                        fn = raw.__func__
                    if inspect.isfunction(fn):
                        qual = f"{obj.__qualname__}.{name}"
                        items.append((qual, getattr(obj, name), obj))
            else:
                continue
            for qual, fn, cls in items:
                entry = f"{info.name}:{qual}"
                if entry not in seen:
                    seen.add(entry)
                    out.append((entry, fn, cls))
    return out


def _solution_namespace(source: list[dict]) -> dict:
    "The instructor's notebook run as a student's: given and solution cells, in order."
    import grading

    ns = {"__name__": "__main__"}
    for c in grading.solution_cells(source):
        if c.get("cell_type") != "code" or grading._meta(c).get("grade"):
            continue
        exec(compile(grading._text(c["source"]), "<solution>", "exec"), ns)
    return ns


def _recorded(part: str, code: str, ns: dict, seed: int) -> list:
    """[(function name, args, kwargs, the solution's output)] of one part: the calls
    its check's `calls()` plans, made as the sandbox makes them (`runner.execute`) on
    the solution's functions, each recorded (the first 3 per function)."""
    import grading
    import runner

    g = grading.check_namespace(code, part, seed)
    if "calls" not in g:
        return []
    g["seed_everything"](f"part {part}")
    kinds = []
    plan = [grading._step(s, n, kinds) for n, s in enumerate(g["calls"]())]
    seen, wrapped = [], dict(ns)
    called = {step["call"] for step in plan if "call" in step}
    for name, fn in ns.items():
        if name in called and callable(fn):  # whatever module it claims to be in

            def record(*a, _name=name, _fn=fn, **k):
                args, kwargs = _fresh(a), _fresh(k)
                out = _fn(*a, **k)
                if sum(r[0] == _name for r in seen) < 3:
                    seen.append((_name, args, kwargs, _fresh(out)))
                return out

            wrapped[name] = record
    g["seed_everything"](f"part {part}")  # as the runner seeds before the calls
    runner.execute(plan, wrapped)
    return seen


def _forms(fn, cls, args, kwargs, names):
    "The ways a submission could call `fn` with a call's arguments: [(args, kwargs)]."
    import inspect

    import torch

    forms = [(args, kwargs)]
    if cls is not None:
        for i, a in enumerate(args):
            if isinstance(a, cls):
                forms.append(((a, *args[:i], *args[i + 1 :]), kwargs))
        attrs = dict(zip(names, args))
        for a in args:
            if isinstance(a, torch.nn.Module):
                attrs.update(dict(a.named_children()))
        for i in range(len(args) + 1):
            forms.append(((_StandIn(attrs), *args[i:]), kwargs))
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    out = []
    for a, k in forms:
        try:
            sig.bind(*a, **k)
        except TypeError:
            continue
        out.append((a, k))
    return out


def derive(assignment: str, root: Path = HERE, seed: int = 0, per_call: int = 5):
    """{part: sorted entries}: for each graded part of `assignment`, every package
    function or method that, called with the part's inputs (directly, as a method of an
    object among them, or with a stand-in `self` holding them), returns one of the
    solution's outputs. Calls arbitrary package code: run it in a process of its own
    (`python assignments/stubs.py derive NAME`), in a scratch folder."""
    import contextlib
    import inspect
    import io
    import signal
    import warnings

    import grading

    warnings.simplefilter("ignore")

    source, checks = grading.load_source(root, assignment)
    ns = _solution_namespace(source)
    found = {}
    everything = candidates()

    def alarm(signum, frame):
        raise TimeoutError("too slow")

    signal.signal(signal.SIGALRM, alarm)
    for part, spec in checks["parts"].items():
        if spec["alone"]:
            continue
        with contextlib.redirect_stdout(io.StringIO()):
            calls = _recorded(part, spec["code"], ns, seed)
        hits = set()
        for name, args, kwargs, want in calls:
            inputs = _leaves([args, kwargs])
            wanted = [w for w in _leaves(want) if _informative(w, inputs)]
            if not wanted:
                continue
            try:
                names = list(inspect.signature(ns[name]).parameters)
            except (TypeError, ValueError):
                names = []
            for entry, fn, cls in everything:
                for a, k in _forms(fn, cls, args, kwargs, names):
                    signal.alarm(per_call)
                    try:
                        with contextlib.redirect_stdout(io.StringIO()):
                            got = fn(*_fresh(a), **_fresh(k))
                    except BaseException as e:  # noqa: BLE001 - any failure: no match
                        if isinstance(e, KeyboardInterrupt):
                            raise
                        continue
                    finally:
                        signal.alarm(0)
                    leaves = _leaves(got)
                    if any(_same(g, w) for w in wanted for g in leaves):
                        hits.add(entry)
                        break
        found[part] = sorted(hits)
    return found


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(description="the stubbed package of an assignment")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("derive", help="package functions that reproduce a part")
    d.add_argument("name")
    d.add_argument("--root", default=str(HERE))
    d.add_argument("--json", action="store_true", help="print JSON")
    args = p.parse_args(argv)
    sys.path.insert(0, str(HERE))
    root = Path(args.root)
    with tempfile.TemporaryDirectory(prefix="sat-derive-") as tmp:
        os.chdir(tmp)  # what package code writes lands here
        found = derive(args.name, root)
    listed = set(
        json.loads((root / "source" / args.name / "checks.json").read_text()).get(
            "forbid", []
        )
    )
    if args.json:
        print(json.dumps({"found": found, "listed": sorted(listed)}))
        return 0
    for part, entries in found.items():
        for e in entries:
            print(f"{part}: {e}{'' if e in listed else '   NOT ON THE STUB LIST'}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
