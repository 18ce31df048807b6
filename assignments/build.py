"""Write the instructor notebooks `source/<name>/<name>.ipynb` from the readable cell files `cells/<name>.py`.

A cell file is a Python file split into cells by marker lines (jupytext's percent format, plus nbgrader's roles):

    # %% md                          a markdown cell; its lines drop the leading "# "
    # %%                             a read-only code cell (given code: imports, data)
    # %% solution id=NAME            the student's code; `### BEGIN SOLUTION` / `### END SOLUTION` mark what is removed
    # %% test id=NAME points=N       an autograded test cell worth N points; `### BEGIN HIDDEN TESTS` / `### END HIDDEN TESTS`
                                     mark the part students never see

nbgrader needs its cell metadata (solution / grade / locked, grade_id, points) on every such cell: this script writes it.
Never run nbdev_clean on the result (it strips the metadata). `python assignments/build.py --check` fails if a notebook
is not what its cell file makes (the tests run it)."""

from __future__ import annotations

import argparse, hashlib, json, re, sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MARKER = re.compile(r"^# %%(.*)$")


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
            attrs = dict(w.split("=", 1) for w in rest)
            if role not in ("md", "code", "solution", "test"):
                sys.exit(
                    f"{path}:{n}: unknown cell role {role!r} (md, code, solution, test)"
                )
            if role in ("solution", "test") and "id" not in attrs:
                sys.exit(f"{path}:{n}: a {role} cell needs id=NAME")
            if role == "test" and "points" not in attrs:
                sys.exit(f"{path}:{n}: a test cell needs points=N")
            cur = {"role": role, "attrs": attrs, "lines": [], "line": n}
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
        if c["role"] != "test" and "BEGIN HIDDEN TESTS" in src:
            sys.exit(f"{name}: cell {gid!r} has hidden tests but is not a test cell")
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
        text = render(notebook(name, parse(f)))
        dest = HERE / "source" / name / f"{name}.ipynb"
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
