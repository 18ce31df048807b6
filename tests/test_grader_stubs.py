"""The package without the answers (issue 61, part 1): while a submission is graded, the
sandbox's copy of `sat_tutorial` has no body for any function on the assignment's stub
list (assignments/stubs.py).

- the stubbed copy: a stubbed function's source is one `raise`, with no docstring and
  none of the original body; every other line of the package is unchanged, nothing
  compiled is copied, and the copy is read-only;
- every stub list names functions the package has, and is built in one piece;
- the derived list: every package function or method that reproduces a part's
  solution on the part's inputs (directly, bound to an object among them, or on a
  stand-in `self`) is on the assignment's stub list (`stubs.py derive`);
- the attacks of issue 61 (tests/assignments/*/cheat_*.py: unwrapped guards, a notebook
  renamed as package code, public helpers, the package calling its own beam search, a
  stand-in object, the package's source copied and executed) reproduce the solution
  with the package itself and the guards in place (the control), and reach only stubs
  with the stubbed copy. tests/test_assignments.py grades the same files in the
  sandbox: each loses exactly its parts, and no file outside the sandbox changes;
- the instructor's notebook (given cells, solutions, visible tests) runs against the
  stubbed copy without an error.

No sandbox needed; the derived lists take about 30 s per assignment on 2 busy cores."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "assignments"
CASES = Path(__file__).resolve().parent / "assignments"
sys.path.insert(0, str(KIT))
import stubs  # noqa: E402

NAMES = sorted(
    p.name for p in (KIT / "source").iterdir() if (p / f"{p.name}.ipynb").exists()
)
STUBBED = [n for n in NAMES if n != "a7_project"]  # A7 grades a run: no stub list


def _listed(name: str) -> list[str]:
    return json.loads((KIT / "source" / name / "checks.json").read_text())["forbid"]


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    "Each assignment's stubbed copy of the package, built once."
    out = {}
    for name in NAMES:
        out[name] = stubs.build(name, _listed(name), tmp_path_factory.mktemp(name))
    yield out
    for p in out.values():
        for q in [p, *p.rglob("*")]:
            os.chmod(q, 0o755 if q.is_dir() else 0o644)


def _function(path: Path, qual: str):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return stubs._targets(tree)[qual]


@pytest.mark.parametrize("name", STUBBED)
def test_a_stubbed_function_keeps_only_its_signature(copies, name):
    pkg = copies[name]
    real = Path(__import__("sat_tutorial").__file__).resolve().parent
    emptied = stubs.stubbed_entries(name, _listed(name))
    assert emptied, name
    for entry in emptied:
        mod, qual = entry.split(":")
        path = stubs._module_file(pkg, mod)
        fn = _function(path, qual)
        assert len(fn.body) == 1 and isinstance(fn.body[0], ast.Raise), entry
        assert ast.get_docstring(fn) is None, entry
        assert stubs.message(entry, name) in ast.unparse(fn.body[0]), entry
        orig = _function(stubs._module_file(real, mod), qual)
        assert [a.arg for a in fn.args.args] == [a.arg for a in orig.args.args]
        assert len(fn.decorator_list) == len(orig.decorator_list), entry
        body = {
            line.strip()
            for stmt in orig.body
            for line in ast.unparse(stmt).splitlines()
            if len(line.strip()) > 12
        }
        text = {line.strip() for line in path.read_text().splitlines()}
        left = {b for b in body if b in text and not b.startswith(("return", "#"))}
        assert not left - _elsewhere(real, mod, qual), (entry, left)
    for src in sorted(real.rglob("*.py")):
        rel = src.relative_to(real)
        mod = "sat_tutorial." + ".".join(rel.with_suffix("").parts)
        if not any(e.startswith(mod + ":") for e in emptied):
            assert (pkg / rel).read_bytes() == src.read_bytes(), rel
    assert not list(pkg.rglob("__pycache__")) and not list(pkg.rglob("*.pyc"))
    assert not os.access(pkg / "core.py", os.W_OK) or os.geteuid() == 0


def _elsewhere(real: Path, mod: str, qual: str) -> set:
    "Lines of a module outside one function (a body line may repeat one of those)."
    path = stubs._module_file(real, mod)
    source = path.read_text(encoding="utf-8")
    fn = _function(path, qual)
    lines = source.splitlines()
    outside = lines[: fn.lineno - 1] + lines[fn.end_lineno :]
    return {line.strip() for line in outside}


def test_every_stub_list_names_functions_the_package_has(tmp_path):
    for name in NAMES:
        assert set(stubs.KEEP.get(name, {})) <= set(_listed(name)), name
    with pytest.raises(LookupError, match="no SoftAttention.nothing"):
        stubs.build(
            "a1_soft_attention",
            ["sat_tutorial.soft_attention:SoftAttention.nothing"],
            tmp_path,
        )


def _env(pythonpath: str) -> dict:
    return {
        **os.environ,
        "PYTHONPATH": pythonpath,
        "MPLBACKEND": "Agg",
        "OMP_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


@pytest.mark.parametrize("name", STUBBED)
def test_the_derived_stub_list(name):
    """Every package function whose output on a part's inputs is the solution's is on
    the assignment's stub list."""
    r = subprocess.run(
        [sys.executable, str(KIT / "stubs.py"), "derive", name, "--json"],
        capture_output=True,
        text=True,
        env=_env(str(ROOT)),
        timeout=1200,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    found = {e for entries in out["found"].values() for e in entries}
    assert found, f"{name}: the search found nothing (it found the listed ones before)"
    missing = found - set(out["listed"])
    assert not missing, f"{name}: reproduce a part, not on the stub list: {missing}"


# ---- the attacks, without a sandbox: the control and the stubbed copy -----------

ATTACK = r"""
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import grading, runner, stubs
name, case = sys.argv[2], sys.argv[3]
source, checks = grading.load_source(grading.HERE, name)
if sys.argv[4] == "guards":
    runner.forbid(checks["forbid"])  # the guards, as in the sandbox
spec = json.loads(open(case).read())
ns = {"__name__": "__main__"}
cells = []
for c in grading.solution_cells(source):
    gid = grading._gid(c)
    if c.get("cell_type") != "code" or grading._meta(c).get("grade"):
        continue
    cells.append(spec["cells"].get(gid, grading._text(c["source"])))
result = {}
for code in cells:
    try:
        exec(compile(code, "<cell>", "exec"), ns)
    except Exception as e:
        result.setdefault("cell errors", []).append(f"{type(e).__name__}: {e}")
truth = stubs._solution_namespace(source)
for part in spec["loses"]:
    code = checks["parts"][part]["code"]
    try:
        got = stubs._recorded(part, code, ns, 5)
        want = stubs._recorded(part, code, truth, 5)
        same = len(got) == len(want) and all(
            any(stubs._same(g, w) for g in stubs._leaves(a[3]))
            for a, b in zip(got, want)
            for w in stubs._leaves(b[3])[:1]
        )
        result[part] = "same" if same else "differs"
    except Exception as e:
        result[part] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
print(json.dumps(result))
"""

ATTACKS = {  # the attacks of issue 61 that reached a graded quantity of the package
    "a1_soft_attention": (
        "cheat_unwraps_guards",
        "cheat_poses_as_the_package",
        "cheat_copies_package_source",
    ),
    "a2_hard_attention": ("cheat_package_helpers",),
    "a3_decoding": ("cheat_decode",),
    "a4_ram": ("cheat_reference_and_loss",),
    "a6_adaptive_butd": ("cheat_recurrence",),
}
RANDOM = {"a2_sample_test"}  # parts whose outputs are random draws
CHEATS = [CASES / name / f"{stem}.py" for name, s in ATTACKS.items() for stem in s]


def _case(path: Path) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_assignments import parse_case

    case = parse_case(path)
    return {"cells": case["cells"], "loses": sorted(case["loses"])}


def _attack(path: Path, pythonpath: str, tmp_path: Path, guards: bool) -> dict:
    name = path.parent.name
    spec = tmp_path / f"{path.stem}.json"
    spec.write_text(json.dumps(_case(path)))
    r = subprocess.run(
        [sys.executable, "-c", ATTACK, str(KIT), name, str(spec)]
        + ["guards" if guards else "none"],
        capture_output=True,
        text=True,
        env=_env(pythonpath),
        timeout=900,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("path", CHEATS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_attacks_reach_only_stubs(copies, path, tmp_path):
    """Each attack reproduces the solution with the package itself (the control: the
    package holds the answer), and meets only NotImplementedError with the
    assignment's stubbed copy, even without the guards (the stubs alone stop it)."""
    assert path.is_file(), path
    name = path.parent.name
    lost = _case(path)["loses"]
    control = _attack(path, str(ROOT), tmp_path, guards=False)
    for part in lost:  # a sampler draws other numbers than the solution's: it runs
        assert control[part] in (("same", "differs") if part in RANDOM else ("same",))

    stubbed = _attack(path, str(copies[name].parent), tmp_path, guards=False)
    for part in lost:
        assert stubbed[part].startswith("NotImplementedError"), (part, stubbed)
        assert f"while grading {name}" in stubbed[part], stubbed[part]


@pytest.mark.parametrize("name", STUBBED)
def test_the_instructors_notebook_runs_on_the_stubbed_copy(copies, name, tmp_path):
    """Given cells, solutions and visible tests, in order, with the stubbed package: no
    cell raises (what a given cell or a check runs of the package is not stubbed)."""
    code = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import grading, sat_tutorial
assert sat_tutorial.__file__.startswith(sys.argv[3]), sat_tutorial.__file__
source, _ = grading.load_source(grading.HERE, sys.argv[2])
ns = {"__name__": "__main__"}
for c in grading.solution_cells(source):
    if c.get("cell_type") == "code":
        exec(compile(grading._text(c["source"]), grading._gid(c) or "cell", "exec"), ns)
print("ok")
"""
    pkg = copies[name].parent
    r = subprocess.run(
        [sys.executable, "-c", code, str(KIT), name, str(pkg)],
        capture_output=True,
        text=True,
        env=_env(str(pkg)),
        timeout=900,
        cwd=tmp_path,
    )
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


def test_the_sandbox_binds_the_stubbed_copy_and_hides_other_copies(
    tmp_path, monkeypatch
):
    """Inside `sandbox.package(folder)` the sandbox binds that folder at
    /pkg/sat_tutorial (outside it, the package itself), and a `sat_tutorial` installed
    in a bound Python environment is covered by an empty folder."""
    import sandbox

    if not sandbox.shutil.which("bwrap"):
        pytest.skip("bubblewrap is not installed")
    prefix = tmp_path / "env"
    installed = prefix / "lib" / "python3.11" / "site-packages" / "sat_tutorial"
    installed.mkdir(parents=True)
    monkeypatch.setattr(sandbox.sys, "prefix", str(prefix))
    copy = tmp_path / "stubbed" / "sat_tutorial"
    copy.mkdir(parents=True)

    def binds(cmd):
        return [cmd[i + 1] for i, a in enumerate(cmd) if a == "--ro-bind"]

    def pkg(cmd):
        return [
            cmd[i + 1]
            for i, a in enumerate(cmd[:-2])
            if cmd[i + 2] == "/pkg/sat_tutorial"
        ]

    args = (["true"], tmp_path, tmp_path, KIT / "runner.py")
    with sandbox.package(copy):
        inside = sandbox.command(*args)
    outside = sandbox.command(*args)
    assert pkg(inside) == [str(copy)] and str(sandbox.package_dir()) not in binds(
        inside
    )
    assert pkg(outside) == [str(sandbox.package_dir())]
    k = inside.index(str(installed))
    assert inside[k - 1] == "--tmpfs" and inside[k + 1 : k + 3] == [
        "--remount-ro",
        str(installed),
    ]
