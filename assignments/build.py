"""Write the instructor notebooks `source/<name>/<name>.ipynb` and the grader's checks
`source/<name>/checks.json` from the readable cell files `cells/<name>.py`.

A cell file is a Python file split into cells by marker lines (jupytext's percent
format, plus nbgrader's roles and the grader's):

    # %% md                     a markdown cell; its lines drop the leading "# "
    # %%                        a read-only code cell (given code: imports, data)
    # %% solution id=NAME       the student's code; `### BEGIN SOLUTION` /
                                `### END SOLUTION` mark what the release removes
    # %% test id=NAME points=N  the visible test of a graded part worth N points
    # %% check id=NAME [alone]  the grader's check of that part (not in the notebook):
                                `calls()` and `outputs(results)` (run by the grader)
                                or `probe(ns)` (run with the student's code) and
                                optional `expect(ns)`; optional `compare(got, want)`;
                                `alone`: run without the student's code
    # %% forbid                 `# module:qualname` lines: package functions the
                                student may not call

nbgrader needs its cell metadata (solution / grade / locked, grade_id, points) on every
such cell: this script writes it. Never run nbdev_clean on the result (it strips the
metadata). `python assignments/build.py --check` fails if a notebook or checks.json is
not what its cell file makes (the tests run it)."""

from __future__ import annotations

import argparse, hashlib, json, re, sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MARKER = re.compile(r"^# %%(.*)$")
ROLES = ("md", "code", "solution", "test", "check", "forbid")


def parse(path: Path) -> list[dict]:
    "The cells of a cell file: role, attributes and source."
    cells, cur = [], None
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = MARKER.match(line)
        if m:
            words = m.group(1).split()
            role, rest = (
                (words[0], words[1:])
                if words and "=" not in words[0]
                else ("code", words)
            )
            flags = {w for w in rest if "=" not in w}
            attrs = dict(w.split("=", 1) for w in rest if "=" in w)
            if role not in ROLES:
                sys.exit(f"{path}:{n}: unknown cell role {role!r} ({', '.join(ROLES)})")
            if role in ("solution", "test", "check") and "id" not in attrs:
                sys.exit(f"{path}:{n}: a {role} cell needs id=NAME")
            if role == "test" and "points" not in attrs:
                sys.exit(f"{path}:{n}: a test cell needs points=N")
            cur = {"role": role, "attrs": attrs, "flags": flags, "lines": []}
            cells.append(cur)
        elif cur is None:
            if line.strip():
                sys.exit(f"{path}:{n}: text before the first '# %%' marker")
        else:
            cur["lines"].append(line)
    return cells


def _source(cell: dict) -> str:
    lines = cell["lines"]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    while lines and not lines[0].strip():
        lines = lines[1:]
    if cell["role"] == "md":
        lines = [l[2:] if l.startswith("# ") else l.lstrip("#") for l in lines]
    return "\n".join(lines)


def notebook(name: str, cells: list[dict]) -> dict:
    "The nbformat-4 notebook, with nbgrader metadata (schema 3) and stable cell ids."
    out, seen = [], set()
    cells = [c for c in cells if c["role"] in ("md", "code", "solution", "test")]
    for k, c in enumerate(cells):
        src = _source(c)
        gid = (
            c["attrs"].get("id")
            or f"{name}_{'md' if c['role'] == 'md' else 'given'}_{k:02d}"
        )
        if gid in seen:
            sys.exit(f"{name}: grade id {gid!r} used twice")
        seen.add(gid)
        nbg = {
            "grade": c["role"] == "test",
            "grade_id": gid,
            "locked": c["role"] != "solution",
            "schema_version": 3,
            "solution": c["role"] == "solution",
            "task": False,
        }
        if c["role"] == "test":
            nbg["points"] = int(c["attrs"]["points"])
        if c["role"] == "solution" and "### BEGIN SOLUTION" not in src:
            sys.exit(
                f"{name}: solution cell {gid!r} has no '### BEGIN SOLUTION' region"
            )
        if c["role"] != "solution" and "BEGIN SOLUTION" in src:
            sys.exit(
                f"{name}: cell {gid!r} has a solution region but is not a solution cell"
            )
        if "BEGIN HIDDEN TESTS" in src:
            sys.exit(
                f"{name}: cell {gid!r} has hidden tests: write them as a check cell"
                " (they run outside the student's process)"
            )
        cell = {
            "cell_type": "markdown" if c["role"] == "md" else "code",
            "id": hashlib.sha1(f"{name}/{gid}".encode()).hexdigest()[:8],
            "metadata": {
                "deletable": False,
                "editable": c["role"] == "solution",
                "nbgrader": nbg,
            },
            "source": src,
        }
        if c["role"] == "solution":
            del cell["metadata"]["deletable"]
        if cell["cell_type"] == "code":
            cell.update(execution_count=None, outputs=[])
        out.append(cell)
    return {
        "cells": out,
        "metadata": {
            "kernelspec": {
                "display_name": "Python 3",
                "language": "python",
                "name": "python3",
            },
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def grading(name: str, cells: list[dict]) -> dict:
    """What the grader needs besides the notebook: the probe of each graded part and
    the package functions the student may not call (source/<name>/checks.json)."""
    tests = {c["attrs"]["id"] for c in cells if c["role"] == "test"}
    parts, forbid = {}, []
    for c in cells:
        if c["role"] == "forbid":
            forbid += [w for line in c["lines"] for w in line.lstrip("# ").split()]
        elif c["role"] == "check":
            gid = c["attrs"]["id"]
            if gid not in tests or gid in parts:
                sys.exit(f"{name}: check {gid!r} has no test cell, or is written twice")
            parts[gid] = {"code": _source(c) + "\n", "alone": "alone" in c["flags"]}
    if set(parts) != tests:
        sys.exit(f"{name}: test cells without a check: {sorted(tests - set(parts))}")
    return {"forbid": forbid, "parts": parts}


def render(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "names", nargs="*", help="assignments to build (default: every cells/*.py)"
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing; fail if a notebook differs from its cell file",
    )
    args = p.parse_args(argv)
    files = [HERE / "cells" / f"{n}.py" for n in args.names] or sorted(
        (HERE / "cells").glob("*.py")
    )
    stale = []
    for f in files:
        if not f.exists():
            sys.exit(f"{f}: no such cell file")
        name = f.stem
        cells = parse(f)
        folder = HERE / "source" / name
        for dest, text in (
            (folder / f"{name}.ipynb", render(notebook(name, cells))),
            (folder / "checks.json", json.dumps(grading(name, cells), indent=1) + "\n"),
        ):
            if args.check:
                if not dest.exists() or dest.read_text(encoding="utf-8") != text:
                    stale.append(str(dest.relative_to(HERE)))
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text, encoding="utf-8")
            print(f"wrote {dest.relative_to(HERE.parent)}")
    if stale:
        print(
            "not what the cell files make (run `python assignments/build.py`): "
            + ", ".join(stale),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
