"""The course kit (assignments/) released and graded end to end in a temporary course.

One module-scoped fixture copies the kit, releases every assignment (`course.py
release`, nbgrader) and grades, in one `course.py grade` run (what `make grade` runs),
these submissions of each assignment: the instructor's solution, the untouched release,
the wrong submissions and cheats in tests/assignments/<assignment>/*.py (each lists the
parts it must lose), and the bad submissions of A1 (deleted and renamed cells, a missing
module, broken folders and notebooks). Every submission runs in a bubblewrap sandbox;
the tests read the grades CSV, the feedback files and the files the cheats went after.

About 8–15 minutes on 2 busy cores (a sandbox per submission imports torch). A7's
genuine 9-minute training run is the slow test at the end (SAT_TUTORIAL_SLOW=1)."""

import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip(
    "nbgrader", reason="the course extra is not installed: pip install -e '.[course]'"
)

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "assignments"
CASES = Path(__file__).resolve().parent / "assignments"
sys.path.insert(0, str(KIT))
import sandbox  # noqa: E402

NO_SANDBOX = sandbox.problem()
pytestmark = pytest.mark.skipif(
    NO_SANDBOX is not None, reason=f"grading needs a sandbox: {NO_SANDBOX}"
)
NAMES = sorted(
    p.name for p in (KIT / "source").iterdir() if (p / f"{p.name}.ipynb").exists()
)
TIMEOUT = 30  # seconds per cell while testing (the kit's own default is 120)
LOOP = "a1_soft_attention"  # also gets the bad submissions and the victim
KIT_FILES = (
    "nbgrader_config.py",
    "course.py",
    "grading.py",
    "runner.py",
    "sandbox.py",
    "stubs.py",
)

warnings.filterwarnings("ignore", module="sqlalchemy")


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _gid(cell: dict):
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def parse_case(path: Path) -> dict:
    """A case: the parts it must lose (`# loses:`, `none` for none), the parts it may
    lose depending on the inputs the grading seed draws (`# may lose:`), text its
    feedback must contain (`# says:`), an optional run folder (`# run:`) and cell
    sources."""
    text = path.read_text(encoding="utf-8")
    loses = re.search(r"^# loses: (.+)$", text, re.M)
    may = re.search(r"^# may lose: (.+)$", text, re.M)
    says = re.search(r"^# says: (.+)$", text, re.M)
    run = re.search(r"^# run: (\S+)$", text, re.M)
    cells, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^# %% (\S+)$", line)
        if m:
            cur = m.group(1)
            cells[cur] = []
        elif cur:
            cells[cur].append(line)
    lost = set(loses.group(1).split()) - {"none"} if loses else None
    return {
        "loses": lost,
        "may": set(may.group(1).split()) if may else set(),
        "says": says.group(1) if says else None,
        "run": run.group(1) if run else None,
        "cells": {k: "\n".join(v).strip() + "\n" for k, v in cells.items()},
    }


def solved(name: str) -> dict:
    "The solution cells as a student would write them: the instructor's, no markers."
    src = {_gid(c): c for c in _cells(KIT / "source" / name / f"{name}.ipynb")}
    return {
        gid: "\n".join(
            line
            for line in "".join(c["source"]).splitlines()
            if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION")
        )
        for gid, c in src.items()
        if c["metadata"]["nbgrader"].get("solution")
    }


def submit(course, student, name, sources, edit=None, run=None) -> Path:
    "submitted/<student>/<name>/<name>.ipynb: the release with `sources` in its cells."
    nb = json.loads(
        (course / "release" / name / f"{name}.ipynb").read_text(encoding="utf-8")
    )
    for c in nb["cells"]:
        if sources and _gid(c) in sources:
            c["source"] = (
                sources[_gid(c)]
                .replace("__COURSE__", str(course))
                .replace("__REPO__", str(ROOT))
                .replace("__PACKAGE__", str(sandbox.package_dir()))
            )
    if edit:
        edit(nb)
    dest = course / "submitted" / student / name
    dest.mkdir(parents=True)
    (dest / f"{name}.ipynb").write_text(json.dumps(nb, indent=1), encoding="utf-8")
    if run is not None:
        shutil.copytree(run, dest / "a7_run")
    return dest


def _env():
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT)]
            + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        ),
    }


def _run(cmd, cwd, ok=True):
    r = subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=3600, env=_env()
    )
    if ok:
        assert r.returncode == 0, (
            f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n"
            f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        )
    return r


def make_checkpoint(run: Path) -> None:
    """An untrained checkpoint of the run's configuration in the package's format: a
    genuine file the grader can evaluate (it captions badly)."""
    code = """
import json, sys, torch
from pathlib import Path
from sat_tutorial.core import seed_everything
from sat_tutorial.checkpoints import save_checkpoint
from sat_tutorial.data import Vocab
from sat_tutorial.scenes import make_scenes
from sat_tutorial.training import TrainConfig, build_models
run = Path(sys.argv[1])
cfg = TrainConfig.from_dict(json.loads((run / "config.json").read_text()))
seed_everything(0)
vocab = Vocab.build(c for r in make_scenes(300, 0, "train") for c in r.captions)
enc, model = build_models(cfg, len(vocab))
save_checkpoint(
    {"format": "sat_tutorial.captioner/1", "config": json.loads(
        (run / "config.json").read_text()), "vocab": vocab.to_dict(),
     "encoder": enc.state_dict(), "model": model.state_dict(), "step": 40},
    run / "best.pt",
)
"""
    _run([sys.executable, "-c", code, str(run)], ROOT)


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


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


def _grades(path: Path) -> dict:
    with open(path, newline="", encoding="utf-8") as f:
        rows = {(r["student"], r["assignment"]): r for r in csv.DictReader(f)}
    for r in rows.values():
        r["parts"] = {
            k: float(v) for k, v in (p.split("=") for p in r["parts"].split("; ") if p)
        }
    return rows


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    "Release everything, submit every case, grade once; the grades and what changed."
    course = tmp_path_factory.mktemp("course")
    for f in KIT_FILES:
        shutil.copy(KIT / f, course / f)
    shutil.copytree(KIT / "source", course / "source")
    _run([sys.executable, str(course / "course.py"), "release"], course)
    runs = tmp_path_factory.mktemp("runs")
    for name in ("short_run", "forged_run"):
        shutil.copytree(CASES / "a7_project" / name, runs / name)
        make_checkpoint(runs / name)
    cases = {}
    for name in NAMES:
        sol = solved(name)
        submit(course, "solution", name, sol, run=_solution_run(name, runs))
        submit(course, "blank", name, None)
        for path in sorted((CASES / name).glob("*.py")):
            case = parse_case(path)
            student = path.stem.replace("_", "-")
            run = runs / case["run"] if case["run"] else None
            submit(course, student, name, {**sol, **case["cells"]}, run=run)
            cases[(student, name)] = case
    sol = solved(LOOP)
    victim = submit(course, "zz-victim", LOOP, sol)
    bad = {
        "deleted-test-cell": dict(edit=_drop("a1_beta_test")),
        "deleted-solution-cell": dict(edit=_drop("a1_beta")),
        "renamed-cell": dict(edit=_rename("a1_penalty_test")),
        "missing-module": dict(
            sources={
                **sol,
                "a1_attend": "import a_module_that_does_not_exist\n" + sol["a1_attend"],
            }
        ),
    }
    for student, kw in bad.items():
        submit(course, student, LOOP, kw.get("sources", sol), kw.get("edit"))
    sub = course / "submitted"
    (sub / "corrupt-notebook" / LOOP).mkdir(parents=True)
    (sub / "corrupt-notebook" / LOOP / f"{LOOP}.ipynb").write_text("{ not a notebook")
    (sub / "misnamed" / LOOP).mkdir(parents=True)
    (sub / "misnamed" / LOOP / "my_work.ipynb").write_text("{}")
    (sub / "nested" / LOOP / LOOP).mkdir(parents=True)
    (sub / "nested" / LOOP / LOOP / f"{LOOP}.ipynb").write_text("{}")
    (sub / "empty" / LOOP).mkdir(parents=True)
    (sub / "old-format" / LOOP).mkdir(parents=True)
    (sub / "old-format" / LOOP / f"{LOOP}.ipynb").write_text(
        json.dumps({"nbformat": 3, "worksheets": [{"cells": []}], "metadata": {}})
    )
    (sub / "loose").mkdir()
    (sub / "loose" / f"{LOOP}.ipynb").write_text("{}")
    (sub / "solution" / "a9_no_such_assignment").mkdir()
    watched = {
        "gradebook": course / "gradebook.db",
        "core": sandbox.package_dir() / "core.py",
        "soft_attention": sandbox.package_dir() / "soft_attention.py",
        "victim": victim / f"{LOOP}.ipynb",
        "source": course / "source" / LOOP / f"{LOOP}.ipynb",
    }
    before = {k: _digest(p) for k, p in watched.items()}
    out = _run(
        [sys.executable, str(course / "course.py"), "grade", "--timeout", str(TIMEOUT)]
        + ["--jobs", "2", "--csv", str(course / "grades.csv")],
        course,
    )
    after = {k: _digest(p) for k, p in watched.items()}
    return {
        "root": course,
        "rows": _grades(course / "grades.csv"),
        "cases": cases,
        "stdout": out.stdout,
        "changed": {k for k in watched if before[k] != after[k]},
    }


def _solution_run(name: str, runs: Path):
    "The run folder submitted with a project's solution (the short run), or None."
    return runs / "short_run" if (CASES / name / "short_run").is_dir() else None


def _max_points(name: str) -> dict:
    return {
        _gid(c): float(c["metadata"]["nbgrader"]["points"])
        for c in _cells(KIT / "source" / name / f"{name}.ipynb")
        if c["metadata"]["nbgrader"].get("grade")
    }


def _lost(row: dict, name: str) -> set:
    full = _max_points(name)
    return {k for k, v in row["parts"].items() if v < full[k]}


def test_notebooks_are_built_from_their_cell_files():
    _run([sys.executable, str(KIT / "build.py"), "--check"], ROOT)


def test_at_least_seven_assignments_of_ten_points_or_more():
    assert len(NAMES) >= 7, NAMES
    for name in NAMES:
        assert sum(_max_points(name).values()) >= 10, name


def test_release_has_no_solution_no_check_no_output(course):
    for name in NAMES:
        rel_dir = course["root"] / "release" / name
        assert sorted(p.name for p in rel_dir.iterdir()) == [f"{name}.ipynb"], name
        checks = json.loads((KIT / "source" / name / "checks.json").read_text())
        probes = {
            line.strip()
            for c in checks["parts"].values()
            for line in c["code"].splitlines()
            if len(line.strip()) > 20
        }
        rel = _cells(rel_dir / f"{name}.ipynb")
        text = "\n".join("".join(c["source"]) for c in rel)
        assert "BEGIN" not in text, f"{name}: a marker is left in the release"
        shown = {line.strip() for line in text.splitlines()}
        for gid, code in solved(name).items():
            secret = {x.strip() for x in code.splitlines() if len(x.strip()) > 30}
            assert not (secret - _given_lines(name)) & shown, f"{name}: {gid} leaked"
        leaked = (probes - _given_lines(name)) & shown
        assert not leaked, f"{name}: lines of the checks in the release: {leaked}"
        for c in rel:
            if c["cell_type"] == "code":
                assert not c["outputs"] and c["execution_count"] is None


def _given_lines(name: str) -> set:
    "Lines the instructor shows outside solution regions."
    out, inside = set(), False
    for c in _cells(KIT / "source" / name / f"{name}.ipynb"):
        for line in "".join(c["source"]).splitlines():
            if line.strip() == "### BEGIN SOLUTION":
                inside = True
            elif line.strip() == "### END SOLUTION":
                inside = False
            elif not inside:
                out.add(line.strip())
    return out


@pytest.mark.parametrize("name", NAMES)
def test_solution_scores_full_marks(course, name):
    r = course["rows"][("solution", name)]
    if name == "a7_project":
        # the untrained checkpoint of the short run follows the rules and misses the
        # target; the genuine run's full marks are test_a7_genuine_run_full_marks
        assert _lost(r, name) == {"a7_target_test"}, r["feedback"]
        assert "below the target" in r["feedback"] or "NaN" in r["feedback"]
        return
    assert float(r["score"]) == sum(_max_points(name).values()), r["feedback"]


@pytest.mark.parametrize("name", NAMES)
def test_untouched_release_scores_zero(course, name):
    r = course["rows"][("blank", name)]
    assert float(r["score"]) == 0 and float(r["max_score"]) > 0, r
    assert set(r["parts"]) == set(_max_points(name)), "every part graded"
    assert "NotImplementedError" in r["feedback"] or name == "a7_project", r


@pytest.mark.parametrize("name", NAMES)
def test_cases_lose_exactly_their_parts(course, name):
    cases = [(s, c) for (s, n), c in course["cases"].items() if n == name]
    wrong = [s for s, c in cases if not s.startswith("cheat") and c["loses"]]
    assert len(wrong) >= 2, f"{name}: needs two wrong submissions in {CASES / name}"
    for student, case in cases:
        r = course["rows"][(student, name)]
        lost = _lost(r, name)
        assert case["loses"] <= lost <= case["loses"] | case["may"], (
            student,
            r["feedback"],
        )
        if case["says"]:
            text = (
                r["feedback"]
                + (course["root"] / "feedback" / student)
                .joinpath(f"{name}.txt")
                .read_text()
            )
            assert case["says"] in text, (student, text)


def test_cheats_change_nothing_outside_their_sandbox(course):
    assert not course["changed"], f"changed by a submission: {course['changed']}"
    r = course["rows"][("zz-victim", LOOP)]
    assert float(r["score"]) == sum(_max_points(LOOP).values()), r["feedback"]
    assert not (course["root"] / "grades.csv").read_text().startswith("hacked")


def test_feedback_leaves_the_checks_out(course):
    probes = set()
    for name in NAMES:
        checks = json.loads((KIT / "source" / name / "checks.json").read_text())
        for c in checks["parts"].values():
            probes |= {x.strip() for x in c["code"].splitlines() if len(x.strip()) > 25}
    for f in (course["root"] / "feedback").rglob("*.txt"):
        lines = {x.strip() for x in f.read_text().splitlines()}
        assert not probes & lines, f"{f}: holds check code"


def test_visible_tests_catch_most_wrong_submissions(course):
    """At least 85 % of the wrong submissions fail a visible test with a message
    (assignments/catch_rate.py gives the rate per assignment, counting only the visible
    test of a part the submission loses)."""
    caught, total = 0, 0
    for (student, name), case in course["cases"].items():
        if student.startswith("cheat") or not case["loses"]:
            continue
        if {"a7_target_test"} == case["loses"] or student in (
            "infinite-loop",
            "ignores-interrupts",
            "crashes",
            "noisy-then-exits",
        ):
            continue  # a run too short, or a process problem: no visible test applies
        total += 1
        text = (course["root"] / "feedback" / student / f"{name}.txt").read_text()
        caught += (
            "Visible tests that failed:" in text and "raised AssertionError" in text
        )
    assert total >= 60 and caught >= 0.85 * total, (caught, total)


@pytest.mark.parametrize(
    "student, part, says",
    [
        ("deleted-test-cell", None, ""),
        ("deleted-solution-cell", "a1_beta_test", "a1_beta is missing"),
        ("renamed-cell", None, ""),
        ("missing-module", "a1_attend_test", "ModuleNotFoundError"),
    ],
)
def test_bad_submissions_get_a_grade_and_a_readable_line(course, student, part, says):
    r = course["rows"][(student, LOOP)]
    assert _lost(r, LOOP) == ({part} if part else set()), r["feedback"]
    assert says in r["feedback"], r["feedback"]


@pytest.mark.parametrize(
    "student, says",
    [
        ("corrupt-notebook", "is not a notebook"),
        ("misnamed", "rename the notebook to a1_soft_attention.ipynb"),
        ("nested", "nested folder"),
        ("empty", "is empty"),
        ("old-format", "nbformat 3"),
        ("loose", "is not in a folder"),
    ],
)
def test_submission_problems_are_one_readable_line(course, student, says):
    r = course["rows"][(student, LOOP)]
    assert float(r["score"]) == 0
    assert float(r["max_score"]) == sum(_max_points(LOOP).values())
    assert says in r["feedback"] and "\n" not in r["feedback"], r["feedback"]
    assert "unknown error" not in r["feedback"]


def test_grade_prints_every_submission(course):
    assert "skipped submitted/solution/a9_no_such_assignment" in course["stdout"]
    n = len(course["rows"])
    assert f"graded {n} submissions" in course["stdout"], course["stdout"][-500:]


def test_grading_one_student_merges_into_grades_csv(course):
    root, csv_path = course["root"], course["root"] / "grades.csv"
    before = _grades(csv_path)
    r = _run(
        [sys.executable, str(root / "course.py"), "grade", LOOP, "--student", "empty"]
        + ["--timeout", str(TIMEOUT), "--csv", str(csv_path)],
        root,
    )
    after = _grades(csv_path)
    assert set(after) == set(before), "rows of other students were dropped"
    assert after[("empty", LOOP)]["feedback"] == before[("empty", LOOP)]["feedback"]
    assert f"holds {len(before)} rows" in r.stdout


def test_nbgrader_autograde_is_refused(course):
    r = _run(
        [sys.executable, "-m", "nbgrader", "autograde", LOOP, "--student", "zz-victim"],
        course["root"],
        ok=False,
    )
    assert "course.py grade" in r.stdout + r.stderr


@pytest.mark.skipif(
    not os.environ.get("SAT_TUTORIAL_SLOW"),
    reason="slow: trains A7's 9-minute run (12–15 minutes); set SAT_TUTORIAL_SLOW=1",
)
def test_a7_genuine_run_full_marks(tmp_path):
    """The A7 solution run as a student runs it: 9 minutes of training plus data and
    evaluation (about 12–15 minutes on 2 cores), then graded from its checkpoint."""
    course = tmp_path / "course"
    course.mkdir()
    for f in KIT_FILES:
        shutil.copy(KIT / f, course / f)
    shutil.copytree(KIT / "source", course / "source")
    _run([sys.executable, str(course / "course.py"), "release"], course)
    dest = submit(course, "student", "a7_project", solved("a7_project"))
    code = "\n".join(solved("a7_project")["a7_command"].splitlines())
    ns = {}
    exec(code, ns)
    _run(
        [sys.executable, "-m", "sat_tutorial", "train", *ns["train_args"]()]
        + ["--out", str(dest / "a7_run"), "--evaluate"],
        dest,
    )
    _run([sys.executable, str(course / "course.py"), "grade"], course)
    r = _grades(course / "grades.csv")[("student", "a7_project")]
    assert float(r["score"]) == 10, r["feedback"]
