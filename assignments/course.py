"""Release and grade the course kit. `python assignments/course.py release` writes the
student versions to `release/` with nbgrader; `python assignments/course.py grade`
grades every `submitted/<student>/<assignment>/` in a sandbox (grading.py) and merges
one row per student and assignment into `grades.csv`: the points of each part and a
readable line for every part that lost points. One broken submission never stops the
others."""

from __future__ import annotations

import argparse
import csv
import os
import secrets
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
LIMIT = 120.0  # seconds per cell and per probe (--timeout)
COLUMNS = ["student", "assignment", "score", "max_score", "parts", "feedback"]


def _need(module: str, what: str):
    "Import `module` or stop with one line naming what to install."
    try:
        return __import__(module)
    except ImportError:
        sys.exit(f"course.py needs {what}: pip install -e '.[course]' (from {REPO})")


def refuse_autograde():
    "An nbgrader preprocessor that stops `nbgrader autograde`: grade with course.py."
    from nbgrader.preprocessors import NbGraderPreprocessor

    class RefuseAutograde(NbGraderPreprocessor):
        def preprocess(self, nb, resources):
            raise RuntimeError(
                "this course is graded by `python assignments/course.py grade` (in a "
                "sandbox, with checks the notebooks do not hold), not by nbgrader "
                "autograde"
            )

    return RefuseAutograde


def assignments(root: Path = HERE) -> list[str]:
    "The assignments of a course folder: the folders of `source/` with their notebook."
    return sorted(
        p.name for p in (root / "source").iterdir() if (p / f"{p.name}.ipynb").exists()
    )


def api(root: Path = HERE):
    "nbgrader's Python API for the course folder `root` (its nbgrader_config.py)."
    from traitlets.config.loader import PyFileConfigLoader
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    warnings.filterwarnings("ignore", module="sqlalchemy")
    warnings.filterwarnings("ignore", message=".*not in session.*")
    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    config.CourseDirectory.root = str(root)
    config.CourseDirectory.db_url = f"sqlite:///{root / 'gradebook.db'}"
    bin_dir = str(Path(sys.executable).parent)  # nbgrader runs `alembic` from there
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    return NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)


def release(nbapi, names=None) -> list[str]:
    """Run `generate_assignment` for each assignment (instructor notebook → `release/`,
    and into the gradebook); return the failures."""
    failed = []
    for name in names or assignments(Path(nbapi.coursedir.root)):
        r = nbapi.generate_assignment(name, force=True)
        print(f"release {name}: {'ok' if r['success'] else 'FAILED'}")
        if not r["success"]:
            failed.append(f"{name}: {r.get('error') or r.get('log')}")
    return failed


def _tests_failed(source: list[dict], cells: list[dict], records: dict) -> list[str]:
    "A line per visible test (or own cell) that raised: what the student sees first."
    lines = []
    for i, c in enumerate(cells):
        err = (records.get(i) or {}).get("error")
        if not err or c["kind"] not in ("test", "solution"):
            continue
        name, msg = (list(err) + ["", ""])[:2]
        where = "visible test" if c["kind"] == "test" else "your cell"
        lines.append(f"{where} {c['id']} raised {name}" + (f": {msg}" if msg else ""))
    return lines


def _row(student: str, name: str, points: dict) -> dict:
    return {
        "student": student,
        "assignment": name,
        "score": 0.0,
        "max_score": sum(points.values()),
        "parts": {p: 0.0 for p in sorted(points)},
        "problems": [],
    }


def grade(
    root: Path,
    names=None,
    students=None,
    limit: float = LIMIT,
    jobs: int = 1,
    log=print,
    csv_path: Path | None = None,
    seed: int | None = None,
) -> list[dict]:
    """Grade every submission (or those of `students`) of each assignment in a sandbox,
    `jobs` at a time; one row per student and assignment: score, max_score, per-part
    points and a readable line for each part that lost points (or why nothing was
    graded). Every probe's inputs derive from `seed`, drawn afresh for each call
    (`secrets.randbits(32)`) unless given, and logged (`log`, the instructor's console:
    never in feedback or grades.csv); the solution's outputs are computed with the same
    seed in the same call. The probes' calls are made here, before any sandbox starts
    (grading.make_calls). Each submission is graded in its own try/except (whatever it
    did, it gets a row: 0 for its parts and one line) and, as soon as it is graded, its
    feedback is written and its row merged into `csv_path` (atomically). Submissions
    run with a copy of the package whose functions on the assignment's stub list have
    no body (stubs.py), built once per assignment in this call; the solution's run,
    which only computes what they are compared with, has the package itself."""
    import grading
    import stubs

    names = names or assignments(root)
    seed = secrets.randbits(32) if seed is None else int(seed)
    log(f"grading seed {seed} (course.py grade --seed {seed} grades the same inputs)")
    sub_root = root / "submitted"
    for extra in sorted(sub_root.glob("*/*")):
        if extra.is_dir() and extra.name not in assignments(root):
            log(f"skipped {extra.relative_to(root)}: no assignment {extra.name!r}")
    specs, tasks = {}, []
    for name in names:
        source, checks = grading.load_source(root, name)
        points = {
            grading._gid(c): float(c["metadata"]["nbgrader"]["points"])
            for c in source
            if grading._meta(c).get("grade")
        }
        specs[name] = (source, checks, points)
        for folder in sorted(p for p in sub_root.glob("*") if p.is_dir()):
            if students is not None and folder.name not in students:
                continue
            if os.path.lexists(folder / name) or os.path.lexists(
                folder / f"{name}.ipynb"
            ):
                tasks.append((name, folder.name))

    inputs = Path(tempfile.mkdtemp(prefix="sat-calls-"))  # the probes' calls
    stubbed = stubs.Stubbed()  # the package each assignment's sandboxes see
    try:
        for name in names:  # here, before the threads: it seeds the generators
            grading.make_calls(specs[name][1], seed, inputs / name)
            stubbed.get(name, specs[name][1].get("forbid", []))  # a stale list stops
        return _grade(
            root, specs, tasks, names, limit, jobs, log, csv_path, seed, inputs, stubbed
        )
    finally:
        shutil.rmtree(inputs, ignore_errors=True)
        stubbed.close()


def _grade(
    root, specs, tasks, names, limit, jobs, log, csv_path, seed, inputs, stubbed
):
    """grade's work, once the probes' calls are in `inputs`/<assignment>/; `stubbed`
    makes each assignment's stubbed package."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import grading
    import sandbox

    sub_root = root / "submitted"
    wants, locks = {}, {name: threading.Lock() for name in names}

    def reference(name):
        "The solution's probe outputs, computed once, when a submission needs them."
        with locks[name]:  # computed with this call's seed: never kept across calls
            if name not in wants:
                source, checks, _ = specs[name]
                sol = {"cells": grading.solution_cells(source)}
                cells, _ = grading.assemble(source, sol)
                want = grading.run(
                    cells, checks, limit, reference=True, seed=seed, calls=inputs / name
                )["parts"]
                bad = {p: r["error"] for p, r in want.items() if "error" in r}
                if bad and not all(checks["parts"][p]["alone"] for p in bad):
                    raise SolutionFails(f"{name}: the solution fails its checks: {bad}")
                wants[name] = want
        return wants[name]

    def one(task):
        name, student = task
        source, checks, points = specs[name]
        row, sub = _row(student, name, points), sub_root / student / name
        linked = grading.not_plain(sub, name)
        if linked:  # before anything reads the submission
            row["problems"].append(linked)
            return row
        if not sub.is_dir():
            row["problems"].append(
                f"{student}/{name}.ipynb is not in a folder: put it in "
                f"submitted/{student}/{name}/{name}.ipynb"
            )
            return row
        nb, problem = grading.read_submission(sub, name)
        if problem:
            row["problems"].append(problem)
            return row
        cells, missing = grading.assemble(source, nb)
        with sandbox.package(stubbed.get(name, checks.get("forbid", []))):
            got = grading.run(
                cells, checks, limit, files=sub, seed=seed, calls=inputs / name
            )
            if any(c["alone"] for c in checks["parts"].values()):
                alone = grading.run([], checks, limit, files=sub, alone=True, seed=seed)
                got["parts"].update(alone["parts"])
        scores = grading.score_parts(checks, points, got["parts"], reference(name))
        for part in sorted(scores):
            pts, why = scores[part]
            row["parts"][part] = pts
            row["score"] += pts
            if pts < points[part]:
                row["problems"].append(f"{part} ({pts:g}/{points[part]:g}): {why}")
        row["problems"] += [
            f"your cell {m} is missing from the notebook" for m in missing
        ]
        row["problems"] += [
            f"your notebook has {n} cells with grade id {gid} (a copied cell keeps "
            "it): only the first was graded; delete the copies"
            for gid, n in sorted(grading.duplicates(source, nb).items())
        ]
        tests = _tests_failed(source, cells, got["cells"])
        row["problems"] += [t for t in tests if t.startswith("your cell")]
        row["tests"] = [t for t in tests if not t.startswith("your cell")]
        return row

    written = threading.Lock()

    def guarded(task):
        "`one`, and whatever goes wrong is this submission's row: 0 and one line."
        name, student = task
        try:
            row = one(task)
        except SolutionFails:
            raise  # the instructor's problem, not the student's: stop
        except grading.Tampered as e:
            row = _row(student, name, specs[name][2])
            row["problems"].append(
                f"the submission tampered with the grader's files ({_line(e)}): "
                "every part scores 0"
            )
        except Exception as e:
            row = _row(student, name, specs[name][2])
            row["problems"].append(
                "the grader could not grade this submission "
                f"({type(e).__name__}: {_line(e)}): every part scores 0"
            )
        with written:
            _feedback(root, row)
            if csv_path is not None:
                write_csv([row], csv_path)
        return row

    with ThreadPoolExecutor(max(1, jobs)) as ex:
        rows = list(ex.map(guarded, tasks))
    return rows


class SolutionFails(RuntimeError):
    "The instructor's solution fails its own checks: grading stops."


def _line(e: BaseException, n: int = 200) -> str:
    """A grader error's message on one line (its lines joined), printable characters
    only, at most n of them."""
    try:
        text = "".join(ch if ch.isprintable() else " " for ch in str(e))
        return " ".join(text.split())[:n]
    except Exception:
        return ""


def _feedback(root: Path, row: dict) -> None:
    "feedback/<student>/<assignment>.txt: the score, each part, what lost points."
    dest = root / "feedback" / row["student"] / f"{row['assignment']}.txt"
    dest.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        f"{row['assignment']}: {row['score']:g}/{row['max_score']:g}",
        *(f"  {k}: {v:g}" for k, v in row["parts"].items()),
        "What lost points:" if row["problems"] else "Nothing lost points.",
        *(f"  - {p}" for p in row["problems"]),
    ]
    if row.get("tests"):
        lines += ["Visible tests that failed:", *(f"  - {t}" for t in row["tests"])]
    dest.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_csv(rows: list[dict], path: Path) -> int:
    """Merge `rows` into the grades file `path`: a row of the same student and
    assignment is replaced, every other row kept. Returns the number of rows."""
    table = {}
    if path.exists():
        with open(path, newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                table[(r.get("student"), r.get("assignment"))] = r
    for r in rows:
        table[(r["student"], r["assignment"])] = {
            "student": r["student"],
            "assignment": r["assignment"],
            "score": f"{r['score']:g}",
            "max_score": f"{r['max_score']:g}",
            "parts": "; ".join(f"{k}={v:g}" for k, v in r["parts"].items()),
            "feedback": " | ".join(r["problems"]),
        }
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, COLUMNS, extrasaction="ignore")
        w.writeheader()
        for key in sorted(table, key=lambda k: tuple(map(str, k))):
            w.writerow(table[key])
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)  # atomic: a reader sees the old file or the new one
    return len(table)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split(".")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    rel = sub.add_parser("release", help="write the student versions to release/")
    rel.add_argument("names", nargs="*", help="assignments (default: all in source/)")
    g = sub.add_parser("grade", help="grade submitted/<student>/<assignment>/")
    g.add_argument("names", nargs="*", help="assignments (default: all in source/)")
    g.add_argument("--student", action="append", help="only this student (repeatable)")
    g.add_argument(
        "--csv",
        default=str(HERE / "grades.csv"),
        help="the grades file rows are merged into (default: assignments/grades.csv)",
    )
    g.add_argument(
        "--timeout",
        type=float,
        default=LIMIT,
        help="seconds per cell and per check (default: %(default)s)",
    )
    g.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="submissions graded at once, each in its own sandbox (default: 1)",
    )
    g.add_argument(
        "--seed",
        type=int,
        default=None,
        help="the seed every check's inputs derive from (default: a fresh one, printed "
        "at the start; give a printed one to grade the same inputs again)",
    )
    args = p.parse_args(argv)
    unknown = [
        n for n in args.names if not (HERE / "source" / n / f"{n}.ipynb").exists()
    ]
    if unknown:
        have = ", ".join(assignments())
        print(
            f"no such assignment: {', '.join(unknown)} (have: {have})", file=sys.stderr
        )
        return 2
    if args.cmd == "release":
        _need("nbgrader", "nbgrader")
        failed = release(api(), args.names or None)
        for f in failed:
            print(f, file=sys.stderr)
        return 1 if failed else 0
    sub_root = HERE / "submitted"
    unknown = [s for s in args.student or [] if not (sub_root / s).is_dir()]
    if unknown:
        have = sorted(p.name for p in sub_root.glob("*") if p.is_dir())
        shown = ", ".join(have[:8]) + (", …" if len(have) > 8 else "")
        print(
            f"no submissions of student {', '.join(unknown)} in {sub_root} "
            f"(have: {shown or 'none'})",
            file=sys.stderr,
        )
        return 2
    _need("torch", "torch and sat_tutorial")
    _need("sat_tutorial", "sat_tutorial")
    import sandbox

    why = sandbox.problem()
    if why:
        print(why, file=sys.stderr)
        return 2
    note = sandbox.cgroup_problem()
    if note:
        print(note)
    if not (HERE / "submitted").is_dir():
        print(
            f"nothing to grade: put submissions in {HERE / 'submitted'}"
            "/<student>/<assignment>/",
            file=sys.stderr,
        )
        return 2
    csv_path = Path(args.csv)
    rows = grade(
        HERE,
        args.names or None,
        args.student,
        args.timeout,
        args.jobs,
        csv_path=csv_path,
        seed=args.seed,
    )
    total = write_csv([], csv_path)  # the rows are in already: count them
    for r in rows:
        score = f"{r['score']:g}/{r['max_score']:g}"
        print(f"{r['student']:>16} {r['assignment']:<24} {score}")
        for line in r["problems"]:
            print(f"{'':>18}- {line}")
    print(f"graded {len(rows)} submissions; {args.csv} holds {total} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
