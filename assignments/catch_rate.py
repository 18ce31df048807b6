"""How many wrong submissions the visible tests catch, per assignment.

Each wrong submission of tests/assignments/<name>/*.py (not the cheats, the endless
loops, the crashes, and not a run that is only too short: no visible test can see
those) is put into the solution notebook and run in the sandbox with the visible tests
only; it is caught when the visible test of a part it loses raises AssertionError with
a message. `--source`
measures another version of the instructor's notebooks (a folder with
<name>/<name>.ipynb, e.g. an older commit's `assignments/source`): hidden-test regions,
if any, are left out.

    python assignments/catch_rate.py [--source DIR] [names...]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = HERE.parent / "tests" / "assignments"
SKIP = re.compile(r"^(cheat_|infinite_loop|ignores_|crashes|noisy_)")


def _visible(source: list[dict]) -> list[dict]:
    "The notebook with hidden-test regions removed (older notebooks had them)."
    out = []
    for c in source:
        c = json.loads(json.dumps(c))
        keep, inside = [], False
        for line in "".join(c.get("source", "")).splitlines():
            if line.strip() == "### BEGIN HIDDEN TESTS":
                inside = True
            elif line.strip() == "### END HIDDEN TESTS":
                inside = False
            elif not inside:
                keep.append(line)
        c["source"] = "\n".join(keep)
        out.append(c)
    return out


def cases(name: str) -> list[tuple[str, dict]]:
    """The wrong submissions of `name` a visible test could catch: (file stem, cells,
    the parts it loses)."""
    out = []
    for path in sorted((CASES / name).glob("*.py")):
        text = path.read_text(encoding="utf-8")
        loses = re.search(r"^# loses: (.+)$", text, re.M)
        if (
            SKIP.match(path.stem)
            or not loses
            or loses.group(1).strip()
            in (
                "none",
                "a7_target_test",
            )
        ):
            continue
        cells, cur = {}, None
        for line in text.splitlines():
            m = re.match(r"^# %% (\S+)$", line)
            if m:
                cur = m.group(1)
                cells[cur] = []
            elif cur:
                cells[cur].append(line)
        body = {k: "\n".join(v) + "\n" for k, v in cells.items()}
        out.append((path.stem, body, set(loses.group(1).split())))
    return out


def measure(
    name: str, source_dir: Path, limit: float = 60.0, jobs: int = 2
) -> tuple[int, list]:
    "(number caught, [(case, caught, message)]) for one assignment."
    import grading

    nb = json.loads((source_dir / name / f"{name}.ipynb").read_text(encoding="utf-8"))
    source = _visible(nb["cells"])
    solution = {
        grading._gid(c): c["source"]
        for c in grading.solution_cells(source)
        if c.get("metadata", {}).get("nbgrader", {}).get("solution")
    }
    no_checks = {"parts": {}, "forbid": []}

    def one(case):
        stem, cells, loses = case
        student = {
            "cells": [
                {**c, "source": cells.get(grading._gid(c), solution[grading._gid(c)])}
                if grading._gid(c) in solution
                else c
                for c in source
            ]
        }
        run_cells, _ = grading.assemble(source, student)
        records = grading.run(run_cells, no_checks, limit)["cells"]
        for i, c in enumerate(run_cells):
            err = (records.get(i) or {}).get("error")
            failed = err and err[0] == "AssertionError" and err[1]
            if c["kind"] == "test" and c["id"] in loses and failed:
                return stem, True, f"{c['id']}: {err[1]}"
        return stem, False, ""

    with ThreadPoolExecutor(jobs) as ex:
        found = list(ex.map(one, cases(name)))
    caught = sum(ok for _, ok, _ in found)
    return caught, found


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("names", nargs="*", help="assignments (default: all with cases)")
    p.add_argument("--source", default=str(HERE / "source"), help="notebooks folder")
    args = p.parse_args(argv)
    sys.path.insert(0, str(HERE))
    names = args.names or sorted(p.name for p in CASES.iterdir() if p.is_dir())
    total_caught = total = 0
    for name in names:
        caught, found = measure(name, Path(args.source))
        total_caught, total = total_caught + caught, total + len(found)
        print(f"{name}: {caught}/{len(found)} caught by a visible test")
        for stem, ok, msg in found:
            print(
                f"  {'caught' if ok else 'MISSED':>6} {stem}"
                + (f": {msg[:90]}" if ok else "")
            )
    if total:
        print(f"all: {total_caught}/{total} = {total_caught / total:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
