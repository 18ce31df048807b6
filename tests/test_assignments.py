"""The course kit (assignments/, nbgrader 0.9.6) released and graded end to end in a temporary course folder.

One module-scoped fixture copies the kit, releases every assignment (`course.py release`) and grades, in one
`course.py grade` run (what `make grade` runs), these submissions of each assignment: the instructor's solution, the
untouched student version, and the plausible wrong submissions in tests/assignments/<assignment>/*.py; plus, for A1, a
submission with an endless loop and the bad submissions of the issue (a deleted graded cell, a renamed one, a missing
module, an error at import). The tests then read the grades CSV and the autograded notebooks."""

import csv, json, os, re, shutil, subprocess, sys, warnings
from pathlib import Path

import pytest

pytest.importorskip(
    "nbgrader", reason="the course extra is not installed: pip install -e '.[course]'"
)

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "assignments"
CASES = Path(__file__).resolve().parent / "assignments"
NAMES = sorted(
    p.name for p in (KIT / "source").iterdir() if (p / f"{p.name}.ipynb").exists()
)
TIMEOUT = 30  # seconds per cell while testing (the kit's own default is 120)
LOOP = "a1_soft_attention"  # the assignment that also gets the endless loop and the bad submissions

warnings.filterwarnings("ignore", module="sqlalchemy")


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _gid(cell: dict):
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _region(src: str, begin: str, end: str) -> list[str]:
    "The non-blank lines between `### BEGIN X` and `### END X` markers."
    out, inside = [], False
    for line in src.splitlines():
        if line.strip() == begin:
            inside = True
        elif line.strip() == end:
            inside = False
        elif inside and line.strip():
            out.append(line.strip())
    return out


def _outside(src: str) -> list[str]:
    "The non-blank lines outside every solution and hidden-test region."
    out, inside = [], False
    for line in src.splitlines():
        if line.strip() in ("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS"):
            inside = True
        elif line.strip() in ("### END SOLUTION", "### END HIDDEN TESTS"):
            inside = False
        elif not inside and line.strip():
            out.append(line.strip())
    return out


def parse_case(path: Path) -> dict:
    "A wrong submission: its docstring, the parts it must lose (`# loses:`), an optional run folder (`# run:`) and cell sources."
    text = path.read_text(encoding="utf-8")
    loses = re.search(r"^# loses: (.+)$", text, re.M)
    run = re.search(r"^# run: (\S+)$", text, re.M)
    cells, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^# %% (\S+)$", line)
        if m:
            cur = m.group(1)
            cells[cur] = []
        elif cur:
            cells[cur].append(line)
    return {
        "loses": set(loses.group(1).split()) if loses else None,
        "run": run.group(1) if run else None,
        "cells": {k: "\n".join(v).strip() + "\n" for k, v in cells.items()},
    }


def solved(name: str) -> dict:
    "The released notebook with every solution cell filled in as a student would: the instructor's code, without markers."
    src = {_gid(c): c for c in _cells(KIT / "source" / name / f"{name}.ipynb")}
    return {
        gid: "\n".join(
            l
            for l in "".join(c["source"]).splitlines()
            if l.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION")
        )
        for gid, c in src.items()
        if c["metadata"]["nbgrader"].get("solution")
    }


def submit(
    course: Path,
    student: str,
    name: str,
    sources: dict | None,
    edit=None,
    run: Path | None = None,
) -> None:
    "Write submitted/<student>/<name>/<name>.ipynb from the released notebook with `sources` put into its cells."
    nb = json.loads(
        (course / "release" / name / f"{name}.ipynb").read_text(encoding="utf-8")
    )
    for c in nb["cells"]:
        if sources and _gid(c) in sources:
            c["source"] = sources[_gid(c)]
    if edit:
        edit(nb)
    dest = course / "submitted" / student / name
    dest.mkdir(parents=True)
    (dest / f"{name}.ipynb").write_text(json.dumps(nb, indent=1), encoding="utf-8")
    if run is not None:
        shutil.copytree(run, dest / "a7_run")


def _run(cmd, cwd):
    "Run a command; the grading kernels it starts import this checkout's sat_tutorial."
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT)]
            + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        ),
    }
    r = subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=1800, env=env
    )
    assert r.returncode == 0, (
        f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    )
    return r


def _drop(gid):
    def edit(nb):
        nb["cells"] = [c for c in nb["cells"] if _gid(c) != gid]

    return edit


def _rename(gid):
    def edit(nb):
        for c in nb["cells"]:
            if _gid(c) == gid:
                c["metadata"]["nbgrader"]["grade_id"] = gid + "_mine"

    return edit


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    "Release everything, submit every case, grade once; the grades by (student, assignment)."
    course = tmp_path_factory.mktemp("course")
    for f in ("nbgrader_config.py", "course.py"):
        shutil.copy(KIT / f, course / f)
    shutil.copytree(KIT / "source", course / "source")
    _run([sys.executable, str(course / "course.py"), "release"], course)
    cases = {}
    for name in NAMES:
        sol = solved(name)
        submit(course, "solution", name, sol, run=_solution_run(name))
        submit(course, "blank", name, None)
        for path in sorted((CASES / name).glob("*.py")):
            case = parse_case(path)
            student = f"wrong-{path.stem}".replace("_", "-")
            submit(
                course,
                student,
                name,
                {**sol, **case["cells"]},
                run=CASES / name / case["run"] if case["run"] else None,
            )
            cases[(student, name)] = case
    sol = solved(LOOP)
    bad = {
        "deleted-cell": dict(edit=_drop("a1_beta_test")),
        "renamed-cell": dict(edit=_rename("a1_penalty_test")),
        "missing-module": dict(
            sources={
                **sol,
                "a1_attend": "import a_module_that_does_not_exist\n" + sol["a1_attend"],
            }
        ),
        "raises-at-import": dict(
            sources={
                **sol,
                "a1_beta": "raise RuntimeError('the student broke this cell')\n"
                + sol["a1_beta"],
            }
        ),
    }
    for student, kw in bad.items():
        submit(course, student, LOOP, kw.get("sources", sol), kw.get("edit"))
    broken = course / "submitted" / "corrupt-notebook" / LOOP
    broken.mkdir(parents=True)
    (broken / f"{LOOP}.ipynb").write_text("{ this is not a notebook", encoding="utf-8")
    (course / "submitted" / "solution" / "a9_no_such_assignment").mkdir()
    out = _run(
        [
            sys.executable,
            str(course / "course.py"),
            "grade",
            "--timeout",
            str(TIMEOUT),
            "--csv",
            str(course / "grades.csv"),
        ],
        course,
    )
    with open(course / "grades.csv", newline="", encoding="utf-8") as f:
        rows = {(r["student"], r["assignment"]): r for r in csv.DictReader(f)}
    for r in rows.values():
        r["parts"] = {
            k: float(v) for k, v in (p.split("=") for p in r["parts"].split("; ") if p)
        }
    return {"root": course, "rows": rows, "cases": cases, "stdout": out.stdout}


def _max_points(name: str) -> dict:
    return {
        _gid(c): float(c["metadata"]["nbgrader"]["points"])
        for c in _cells(KIT / "source" / name / f"{name}.ipynb")
        if c["metadata"]["nbgrader"].get("grade")
    }


def test_notebooks_are_built_from_their_cell_files():
    _run([sys.executable, str(KIT / "build.py"), "--check"], ROOT)


def test_at_least_seven_assignments_of_ten_points_or_more():
    assert len(NAMES) >= 7, NAMES
    for name in NAMES:
        assert sum(_max_points(name).values()) >= 10, name


def test_release_has_no_solution_no_hidden_test_no_output(course):
    for name in NAMES:
        src = "\n".join(
            "".join(c["source"])
            for c in _cells(KIT / "source" / name / f"{name}.ipynb")
        )
        secret = set(_region(src, "### BEGIN SOLUTION", "### END SOLUTION")) | set(
            _region(src, "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
        )
        assert secret, f"{name}: no solution region"
        shown = {
            l.strip()
            for c in _cells(KIT / "source" / name / f"{name}.ipynb")
            for l in _outside("".join(c["source"]))
        }
        secret -= shown  # a line the instructor also shows elsewhere (`return out`, `model.eval()`) is no leak
        rel = _cells(course["root"] / "release" / name / f"{name}.ipynb")
        lines = {l.strip() for c in rel for l in "".join(c["source"]).splitlines()}
        leaked = secret & lines
        assert not leaked, (
            f"{name}: the release shows lines of a solution or hidden test: {sorted(leaked)[:5]}"
        )
        assert not any("BEGIN" in "".join(c["source"]) for c in rel), (
            f"{name}: a marker is left in the release"
        )
        for c in rel:
            if c["cell_type"] == "code":
                assert not c["outputs"] and c["execution_count"] is None, (
                    f"{name}: outputs in {_gid(c)}"
                )


def _solution_run(name: str):
    "The run folder submitted with a project's solution: a full run if one is recorded, else the short one (or None)."
    for run in ("full_run", "short_run"):
        if (CASES / name / run).is_dir():
            return CASES / name / run
    return None


@pytest.mark.parametrize("name", NAMES)
def test_solution_scores_full_marks(course, name):
    r = course["rows"][("solution", name)]
    run = _solution_run(name)
    if run is not None and run.name == "short_run":
        # a project without its recorded full-length run (tests/assignments/a7_project/full_run): the solution is
        # submitted with the genuine short run and must lose the target's points only (README.md, "A7 in the tests")
        full = _max_points(name)
        assert {k for k, v in r["parts"].items() if v < full[k]} == {
            "a7_target_test"
        }, r["feedback"]
        return
    assert (
        float(r["score"]) == float(r["max_score"]) == sum(_max_points(name).values())
    ), (r["score"], r["feedback"])


@pytest.mark.parametrize("name", NAMES)
def test_untouched_release_grades_and_scores_zero(course, name):
    r = course["rows"][("blank", name)]
    assert float(r["score"]) == 0 and float(r["max_score"]) > 0, r
    assert set(r["parts"]) == set(_max_points(name)), "every part graded"
    assert (
        "NotImplementedError" in r["feedback"]
        and "could not grade" not in r["feedback"]
    )


@pytest.mark.parametrize("name", NAMES)
def test_wrong_submissions_score_partial_credit(course, name):
    cases = [
        (s, c)
        for (s, n), c in course["cases"].items()
        if n == name and s != "wrong-infinite-loop"
    ]
    assert len(cases) >= 2, (
        f"{name}: needs at least two plausible wrong submissions in tests/assignments/{name}/"
    )
    full = _max_points(name)
    for student, case in cases:
        r = course["rows"][(student, name)]
        assert 0 < float(r["score"]) < float(r["max_score"]), (
            student,
            r["score"],
            r["feedback"],
        )
        lost = {k for k, v in r["parts"].items() if v < full[k]}
        if case["loses"] is not None:
            assert lost == case["loses"], (student, lost, r["feedback"])


def test_endless_loop_is_stopped_and_scores_zero_on_that_part(course):
    r = course["rows"][("wrong-infinite-loop", LOOP)]
    case = course["cases"][("wrong-infinite-loop", LOOP)]
    for part in case["loses"]:
        assert r["parts"][part] == 0
    assert "time limit" in r["feedback"], r["feedback"]
    assert float(r["score"]) == sum(
        v for k, v in _max_points(LOOP).items() if k not in case["loses"]
    )


@pytest.mark.parametrize(
    "student, part, says",
    [
        ("deleted-cell", "a1_beta_test", "missing from the submission"),
        ("renamed-cell", "a1_penalty_test", "missing from the submission"),
        ("missing-module", "a1_attend_test", "ModuleNotFoundError"),
        ("raises-at-import", "a1_beta_test", "the student broke this cell"),
    ],
)
def test_bad_submissions_get_a_grade_and_a_readable_line(course, student, part, says):
    r = course["rows"][(student, LOOP)]
    full = _max_points(LOOP)
    assert r["parts"][part] == 0 and says in r["feedback"], r
    assert all(r["parts"][k] == v for k, v in full.items() if k != part), (
        "the other parts keep their points"
    )
    assert float(r["score"]) == sum(full.values()) - full[part]


def test_unreadable_notebook_scores_zero_with_a_reason(course):
    r = course["rows"][("corrupt-notebook", LOOP)]
    assert float(r["score"]) == 0 and float(r["max_score"]) == sum(
        _max_points(LOOP).values()
    )
    assert "could not grade" in r["feedback"], r["feedback"]


def test_grade_prints_every_submission(course):
    assert f"wrote {course['root'] / 'grades.csv'}" in course["stdout"]
    assert "skipped submitted/solution/a9_no_such_assignment" in course["stdout"]
    assert len(course["rows"]) == len(NAMES) * 2 + len(course["cases"]) + 5
