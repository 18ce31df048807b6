"""Release and grade the course kit with nbgrader's own machinery (no grader of our own): `python assignments/course.py
release` writes the student versions to `release/`; `python assignments/course.py grade` autogrades every
`submitted/<student>/<assignment>/` and writes `grades.csv`, one row per student and assignment with the points of each
part and a readable line for every part that lost points. One broken submission never stops the others."""

from __future__ import annotations

import argparse, csv, json, os, re, sys, warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

from nbgrader.preprocessors import NbGraderPreprocessor  # noqa: E402


class ForgetUnknownCells(NbGraderPreprocessor):
    """Before nbgrader's `OverwriteCells`: a cell whose grade id the instructor's notebook does not have (a student renamed
    it) becomes a plain cell. nbgrader 0.9.6 would otherwise stop on it ("nbgrader cell does not have a grade_id") and
    grade nothing of that submission; now only the renamed part is missing, and it scores 0."""

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook, MissingEntry

        notebook, assignment = (
            resources["nbgrader"]["notebook"],
            resources["nbgrader"]["assignment"],
        )
        with Gradebook(resources["nbgrader"]["db_url"]) as gb:
            try:
                known = {
                    c.name for c in gb.find_notebook(notebook, assignment).source_cells
                }
            except MissingEntry:
                return nb, resources
        for cell in nb.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if gid is not None and gid not in known:
                self.log.warning(
                    "cell %r is not in the assignment (renamed?): graded as an ordinary cell",
                    gid,
                )
                del cell.metadata["nbgrader"]
        return nb, resources


def assignments(root: Path = HERE) -> list[str]:
    "The assignments of a course folder: the folders of `source/` holding a notebook of the same name."
    return sorted(
        p.name for p in (root / "source").iterdir() if (p / f"{p.name}.ipynb").exists()
    )


def api(root: Path = HERE, timeout: int | None = None):
    "nbgrader's Python API for the course folder `root` (its nbgrader_config.py, plus a per-cell `timeout` if given)."
    from traitlets.config.loader import PyFileConfigLoader
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    warnings.filterwarnings("ignore", module="sqlalchemy")
    warnings.filterwarnings("ignore", message=".*not in session.*")
    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    config.CourseDirectory.root = str(root)
    config.CourseDirectory.db_url = f"sqlite:///{root / 'gradebook.db'}"
    if timeout is not None:
        config.Execute.timeout = timeout
    if (
        REPO / "sat_tutorial" / "__init__.py"
    ).exists():  # the grading kernel imports this checkout's sat_tutorial
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(REPO)]
            + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        )
    bin_dir = str(
        Path(sys.executable).parent
    )  # nbgrader runs `alembic` from the environment's bin
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    return NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)


def release(nbapi, names=None) -> list[str]:
    "Run `generate_assignment` for each assignment (instructor notebook → `release/`, and into the gradebook); return the failures."
    failed = []
    for name in names or assignments(Path(nbapi.coursedir.root)):
        r = nbapi.generate_assignment(name, force=True)
        print(f"release {name}: {'ok' if r['success'] else 'FAILED'}")
        if not r["success"]:
            failed.append(f"{name}: {r.get('error') or r.get('log')}")
    return failed


def _cell_problem(nb_path: Path, gid: str) -> str:
    "Why the graded cell `gid` of an autograded notebook lost points: its error, or that it is missing."
    if not nb_path.exists():
        return "the notebook was not graded"
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == gid:
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    msg = " ".join(str(out.get("evalue", "")).split())[:200]
                    if (
                        "Timeout" in str(out.get("ename"))
                        or out.get("ename") == "KeyboardInterrupt"
                    ):
                        return "stopped by the per-cell time limit (an endless or very slow loop?)"
                    return (
                        f"{out.get('ename')}: {msg}" if msg else str(out.get("ename"))
                    )
            return "no error, but the test did not pass"
    return "this graded cell is missing from the submission (deleted, or its nbgrader metadata renamed): 0 points"


def grade(nbapi, names=None, students=None) -> list[dict]:
    """Autograde every submission (or those of `students`) of each assignment; return one row per student and assignment:
    score, max_score, per-part points and a readable line for each part that lost points (or why nothing was graded)."""
    from nbgrader.api import Gradebook, MissingEntry

    root = Path(nbapi.coursedir.root)
    names = names or assignments(root)
    with Gradebook(nbapi.coursedir.db_url) as gb:
        known = {a.name for a in gb.assignments}
    missing = [n for n in names if n not in known]
    if missing:
        release(nbapi, missing)  # grading needs the assignment in the gradebook
    rows = []
    for extra in sorted(
        p
        for p in (root / "submitted").glob("*/*")
        if p.is_dir() and p.name not in assignments(root)
    ):
        print(
            f"skipped {extra.relative_to(root)}: there is no assignment {extra.name!r} in source/"
        )
    for name in names:
        subs = (
            sorted(
                p.parent.name
                for p in (root / "submitted").glob(f"*/{name}")
                if p.is_dir()
            )
            if (root / "submitted").is_dir()
            else []
        )
        for student in subs:
            if students is not None and student not in students:
                continue
            r = nbapi.autograde(name, student, force=True, create=True)
            row = {
                "student": student,
                "assignment": name,
                "score": 0.0,
                "max_score": 0.0,
                "parts": {},
                "problems": [],
            }
            if not r["success"]:
                row["problems"].append(
                    "nbgrader could not grade this submission: " + _failure(r)
                )
            with Gradebook(nbapi.coursedir.db_url) as gb:
                try:
                    a = gb.find_assignment(name)
                except MissingEntry:
                    rows.append(row)
                    continue
                for nb in a.notebooks:
                    row["max_score"] += nb.max_score
                    try:
                        sub = gb.find_submission_notebook(nb.name, name, student)
                    except MissingEntry:
                        row["problems"].append(
                            f"{nb.name}.ipynb: not submitted or not graded: 0 points"
                        )
                        continue
                    for g in sorted(sub.grades, key=lambda g: g.name):
                        pts = float(g.auto_score or 0.0)
                        row["parts"][g.name] = pts
                        row["score"] += pts
                        if pts < g.max_score:
                            why = _cell_problem(
                                root
                                / "autograded"
                                / student
                                / name
                                / f"{nb.name}.ipynb",
                                g.name,
                            )
                            row["problems"].append(
                                f"{g.name} ({pts:g}/{g.max_score:g}): {why}"
                            )
            row["problems"] += _solution_errors(root / "autograded" / student / name)
            rows.append(row)
    return rows


def _failure(result: dict) -> str:
    "The exception behind a failed `autograde` (say, a file that is not a notebook), from nbgrader's log."
    text = (result.get("log") or "") + "\n" + (result.get("error") or "")
    found = [
        m.group(2) + ": " + m.group(3)
        for m in re.finditer(
            r"^\s*([\w.]+\.)?(\w+(?:Error|Exception)): (.*)$", text, re.M
        )
        if m.group(2) != "NbGraderException"
    ]
    return (found[-1] if found else "unknown error (see nbgrader's log)")[:240]


def _solution_errors(folder: Path) -> list[str]:
    "A line for each of the student's own cells (solution cells) that raised when graded: the cause of the failures that follow."
    lines = []
    for nb_path in sorted(folder.glob("*.ipynb")):
        for cell in json.loads(nb_path.read_text(encoding="utf-8"))["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if not meta.get("solution") or meta.get("grade"):
                continue
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    msg = " ".join(str(out.get("evalue", "")).split())[:200]
                    lines.append(
                        f"your cell {meta.get('grade_id')} raised {out.get('ename')}"
                        + (f": {msg}" if msg else "")
                    )
    return lines


def write_csv(rows: list[dict], path: Path) -> None:
    "The grades: student, assignment, score, max_score, the points of each part, and what lost points."
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["student", "assignment", "score", "max_score", "parts", "feedback"])
        for r in rows:
            w.writerow(
                [
                    r["student"],
                    r["assignment"],
                    f"{r['score']:g}",
                    f"{r['max_score']:g}",
                    "; ".join(f"{k}={v:g}" for k, v in r["parts"].items()),
                    " | ".join(r["problems"]),
                ]
            )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split(":")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    rel = sub.add_parser("release", help="write the student versions to release/")
    rel.add_argument("names", nargs="*", help="assignments (default: all in source/)")
    g = sub.add_parser(
        "grade", help="autograde submitted/<student>/<assignment>/ and write grades.csv"
    )
    g.add_argument("names", nargs="*", help="assignments (default: all in source/)")
    g.add_argument("--student", action="append", help="only this student (repeatable)")
    g.add_argument(
        "--csv",
        default=str(HERE / "grades.csv"),
        help="where to write the grades (default: assignments/grades.csv)",
    )
    g.add_argument(
        "--timeout",
        type=int,
        default=None,
        help="seconds per cell (default: nbgrader_config.py's)",
    )
    args = p.parse_args(argv)
    unknown = [
        n for n in args.names if not (HERE / "source" / n / f"{n}.ipynb").exists()
    ]
    if unknown:
        print(
            f"no such assignment in {HERE / 'source'}: {', '.join(unknown)} (have: {', '.join(assignments())})",
            file=sys.stderr,
        )
        return 2
    if args.cmd == "release":
        failed = release(api(), args.names or None)
        for f in failed:
            print(f, file=sys.stderr)
        return 1 if failed else 0
    if not (HERE / "submitted").is_dir():
        print(
            f"nothing to grade: put submissions in {HERE / 'submitted'}/<student>/<assignment>/",
            file=sys.stderr,
        )
        return 2
    rows = grade(api(timeout=args.timeout), args.names or None, args.student)
    write_csv(rows, Path(args.csv))
    for r in rows:
        print(
            f"{r['student']:>16} {r['assignment']:<24} {r['score']:g}/{r['max_score']:g}"
        )
        for line in r["problems"]:
            print(f"{'':>18}- {line}")
    print(f"wrote {args.csv} ({len(rows)} submissions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
