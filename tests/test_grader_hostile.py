"""The course kit's grader against submissions that attack the grader itself (issue 61,
parts 3–5): what the sandbox writes is hostile input, one submission never breaks
another's grade, the instructor's commands do what the README says.

Most tests here need no sandbox: they call the grader's functions on forged files and
notebooks. `hostile_course` grades a small course (A1 only) in one `course.py grade`
run with honest, forging, hanging and malformed submissions side by side (about 3–6
minutes on 2 busy cores: a sandbox per submission imports torch)."""

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "assignments"
sys.path.insert(0, str(KIT))
import course as course_py  # noqa: E402
import grading  # noqa: E402
import sandbox  # noqa: E402

A1 = "a1_soft_attention"
KIT_FILES = (
    "nbgrader_config.py",
    "course.py",
    "grading.py",
    "runner.py",
    "sandbox.py",
    "stubs.py",
)
PARTS = ("a1_attend_test", "a1_beta_test", "a1_init_test", "a1_penalty_test")


def _source_cells() -> list[dict]:
    nb = json.loads((KIT / "source" / A1 / f"{A1}.ipynb").read_text(encoding="utf-8"))
    return nb["cells"]


def _checks() -> dict:
    return json.loads((KIT / "source" / A1 / "checks.json").read_text())


def _solution_nb() -> dict:
    "The instructor's A1 notebook as a student's full-marks submission (no markers)."
    nb = json.loads((KIT / "source" / A1 / f"{A1}.ipynb").read_text(encoding="utf-8"))
    nb["cells"] = grading.solution_cells(nb["cells"])
    return nb


def _cell(nb: dict, gid: str) -> dict:
    return next(c for c in nb["cells"] if grading._gid(c) == gid)


def _within(seconds: float, fn):
    "fn() in a thread; fails (instead of hanging the test run) if it takes longer."
    box = {}

    def go():
        try:
            box["value"] = fn()
        except BaseException as e:
            box["error"] = e

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s (blocked?)"
    if "error" in box:
        raise box["error"]
    return box["value"]


# ---- the events file: hostile input -------------------------------------------------

GOOD = [
    {"start": 0},
    {"cell": 0, "stdout": "", "stderr": "", "error": None, "seconds": 0.1},
    {"start_part": "p"},
    {"part": "p", "result": {"__tensor__": "float32", "shape": [1], "data": [1.0]}},
    {"end": True},
]


def _write_events(path: Path, lines) -> None:
    with open(path, "w") as f:
        for line in lines:
            f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")


def test_well_formed_events_are_read(tmp_path):
    path = tmp_path / "events.jsonl"
    _write_events(path, GOOD)
    with open(path, "a") as f:
        f.write('{"start": 1')  # an incomplete last line waits for its newline
    got, offset = grading._events(path, 0, n_cells=2, parts={"p"})
    assert [set(e) for e in got] == [
        {"start"},
        {"cell", "stdout", "stderr", "error"},
        {"start_part"},
        {"part", "result"},
        {"end"},
    ]
    assert offset == path.stat().st_size - len('{"start": 1')
    assert grading._events(tmp_path / "absent.jsonl", 0, 2, {"p"}) == ([], 0)


@pytest.mark.parametrize(
    "forged",
    [
        "[" * 100_000 + "]" * 100_000,
        "[" * 100_000,
        {"cell": 1, "error": 5},
        {"cell": 0, "error": ["Name", "message", "extra"]},
        {"cell": 0, "error": None, "stdout": ["x"]},
        {"cell": True, "error": None},
        {"cell": 10**30, "error": None},
        {"part": ["x"]},
        {"part": {"p": 1}, "result": 1},
        {"part": "not_a_part", "result": 1},
        {"part": "p", "error": 5},
        {"part": "p", "result": 1, "error": ["A", "b"]},
        {"start": "0"},
        {"start_part": ["p"]},
        {"end": 1},
        {"cell": 0, "error": None, "extra": 1},
        [],
        "5",
        "null",
        '"a string"',
        "not json at all",
        "\xff\xfe",
    ],
)
def test_a_forged_line_is_tampering_not_a_crash(tmp_path, forged):
    "Any line runner.py never writes raises Tampered (graded 0), never anything else."
    path = tmp_path / "events.jsonl"
    _write_events(path, [GOOD[0], forged, GOOD[1]])
    with pytest.raises(grading.Tampered):
        grading._events(path, 0, n_cells=2, parts={"p"})


def test_event_strings_are_cleaned_and_capped(tmp_path):
    path = tmp_path / "events.jsonl"
    long = "x" * 100_000
    _write_events(
        path,
        [
            {
                "cell": 0,
                "stdout": long,
                "stderr": "",
                "error": ["Err\nor", "a\n\nb " + long],
            },
            {"cell": 0, "error": ["E" * 500, "\x1b[1m" + long + "\nmore"]},
        ],
    )
    (ev, ev2), _ = grading._events(path, 0, n_cells=1, parts=())
    assert len(ev["stdout"]) == grading.MAX_TEXT
    name, msg = ev["error"]  # issue 61 part 2: the first line, 120 printable at most
    assert name == "Error" and msg == "a"
    name, msg = ev2["error"]
    assert name == "E" * grading.NAME and msg == "[1m" + "x" * 117


def test_a_fifo_never_blocks_the_grader(tmp_path):
    path = tmp_path / "events.jsonl"
    os.mkfifo(path)
    with pytest.raises(grading.Tampered, match="other than a file"):
        _within(10, lambda: grading._events(path, 0, 1, ()))


def test_a_link_is_not_followed(tmp_path):
    "A link to a file of well-formed events (say another run's) is refused, not read."
    real = tmp_path / "real.jsonl"
    _write_events(real, GOOD)
    path = tmp_path / "events.jsonl"
    path.symlink_to(real)
    with pytest.raises(grading.Tampered):
        grading._events(path, 0, 2, {"p"})
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(grading.Tampered):
        grading._events(tmp_path / "dir.jsonl", 0, 2, {"p"})


def test_the_events_read_are_capped(tmp_path, monkeypatch):
    monkeypatch.setattr(grading, "MAX_EVENTS", 1000)
    path = tmp_path / "events.jsonl"
    _write_events(path, [{"start": 0}] * 500)  # 13 bytes a line: 6500 bytes
    got, offset = grading._events(path, 0, 1, ())
    assert offset <= 1000 and len(got) == offset // 13 == 76
    assert grading._events(path, offset, 1, ()) == ([], offset)  # 12 bytes, no "\n"
    assert grading._events(path, 1000, 1, ()) == ([], 1000)


def test_the_stderr_tail_reads_only_the_end(tmp_path):
    err = tmp_path / "stderr.txt"
    err.write_bytes(b"a" * (1 << 20) + b"\nMemoryError\n")
    assert grading._tail(err).endswith("MemoryError\n")
    assert len(grading._tail(err)) == 4096
    assert "out of memory" in grading._death(1, err)


def test_the_wall_clock_limit_holds_whatever_the_reader_does(tmp_path, monkeypatch):
    """A reader stuck for good (as one blocked on a FIFO was): the timer still kills the
    sandbox's whole process group at the deadline, and the grader moves on."""
    stuck = threading.Event()

    def hangs(*args, **kwargs):
        stuck.set()
        threading.Event().wait()  # forever

    script = tmp_path / "tree.sh"
    pids = tmp_path / "pids"
    script.write_text(f"sleep 600 & echo $! > {pids}; sleep 600\n")
    monkeypatch.setattr(grading, "_read", hangs)
    monkeypatch.setattr(grading, "STARTUP", 1.0)
    monkeypatch.setattr(grading, "GRACE", 0.5)
    monkeypatch.setattr(sandbox, "command", lambda *a, **k: ["sh", str(script)])
    out = tmp_path / "out"
    out.mkdir()
    job = {"cells": [], "checks": {}}
    t0 = time.monotonic()
    with pytest.raises(grading.Tampered, match="wall-clock limit"):
        _within(30, lambda: grading._attempt_run(job, tmp_path, out, 1.0, 1))
    assert stuck.is_set()
    assert time.monotonic() - t0 < 10
    child = int(pids.read_text())
    for _ in range(50):  # the background sleep, in the same group, is gone too
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        try:  # a zombie of init's: reaped soon; count it as dead when it is one
            if Path(f"/proc/{child}/stat").read_text().split()[2] == "Z":
                break
        except OSError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the sandbox's process group outlived the deadline")


# ---- notebooks that are not what they claim ----------------------------------------


def test_a_list_where_metadata_should_be_is_no_crash():
    nb = _solution_nb()
    nb["metadata"] = []
    _cell(nb, "a1_attend")["metadata"] = ["x"]
    _cell(nb, "a1_beta")["metadata"] = {"nbgrader": ["x"]}
    _cell(nb, "a1_init")["metadata"] = {"nbgrader": {"grade_id": ["a1_init"]}}
    nb["cells"][0]["metadata"] = None
    nb["cells"].append(["not", "a", "cell"])
    nb["cells"].append({"cell_type": "code", "source": [1, 2], "metadata": 5})
    cells, missing = grading.assemble(_source_cells(), nb)
    assert set(missing) == {"a1_attend", "a1_beta", "a1_init"}
    assert all(isinstance(c["source"], str) for c in cells)
    for student in (None, [], {"cells": {"a": 1}}, {"cells": None}):
        cells, missing = grading.assemble(_source_cells(), student)
        assert "a1_attend" in missing


def test_a_notebook_nested_too_deep_or_too_big_is_one_line(tmp_path, monkeypatch):
    sub = tmp_path / "bob" / A1
    sub.mkdir(parents=True)
    (sub / f"{A1}.ipynb").write_text('{"cells": ' + "[" * 100_000 + "]" * 100_000 + "}")
    nb, why = grading.read_submission(sub, A1)
    assert (
        nb is None
        and why == f"bob/{A1}/{A1}.ipynb is not a notebook (JSON nested too deep)"
    )
    monkeypatch.setattr(grading, "MAX_NOTEBOOK", 1000)
    (sub / f"{A1}.ipynb").write_text(json.dumps(_solution_nb()))
    nb, why = grading.read_submission(sub, A1)
    assert nb is None and "MiB a notebook may have" in why


# ---- one submission never breaks another's grade: course.grade ---------------------


def _mini_course(tmp_path: Path, students: dict) -> Path:
    "A course folder with A1's source and a notebook per student."
    root = tmp_path / "course"
    shutil.copytree(KIT / "source" / A1, root / "source" / A1)
    for student, nb in students.items():
        dest = root / "submitted" / student / A1
        dest.mkdir(parents=True)
        (dest / f"{A1}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    return root


def _read_csv(path: Path) -> dict:
    with open(path, newline="", encoding="utf-8") as f:
        return {(r["student"], r["assignment"]): r for r in csv.DictReader(f)}


def test_a_grader_failure_costs_only_its_own_submission(tmp_path, monkeypatch):
    """An exception while grading one submission (here a fake sandbox run that raises)
    is that submission's row, 0 and one line; the others are graded, and grades.csv is
    merged after each submission (the first row is there before the next one runs)."""
    root = _mini_course(
        tmp_path,
        {"alice": _solution_nb(), "bob": _solution_nb(), "eve": _solution_nb()},
    )
    csv_path = root / "grades.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, course_py.COLUMNS)
        w.writeheader()
        kept = {"student": "zed", "assignment": A1, "score": "7", "max_score": "10"}
        w.writerow({**kept, "parts": "a1_attend_test=3", "feedback": "kept"})
    seen_before_bob = {}

    def fake_run(
        cells,
        checks,
        limit,
        files=None,
        reference=False,
        alone=False,
        seed=None,
        calls=None,
    ):
        if files is not None and files.parent.name == "bob":
            seen_before_bob.update(_read_csv(csv_path))
            raise RuntimeError("boom\nwith a second line")
        if files is not None and files.parent.name == "eve":
            raise grading.Tampered("events.jsonl was replaced")
        same = [[1.0, 1.0]] * 4  # four steps of two results each: fits A1's calls
        return {"cells": {}, "parts": {p: {"result": same} for p in PARTS}}

    monkeypatch.setattr(grading, "run", fake_run)
    rows = course_py.grade(root, [A1], limit=5, log=lambda *a: None, csv_path=csv_path)
    by = {r["student"]: r for r in rows}
    assert by["alice"]["score"] == 10
    assert ("alice", A1) in seen_before_bob, "alice's row was not written before bob's"
    for who, says in (("bob", "RuntimeError: boom with a second line"), ("eve", "")):
        assert by[who]["score"] == 0 and set(by[who]["parts"].values()) == {0.0}
        assert len(by[who]["problems"]) == 1, by[who]["problems"]
        assert says in by[who]["problems"][0]
    assert "tampered" in by["eve"]["problems"][0]
    table = _read_csv(csv_path)
    assert set(table) == {(s, A1) for s in ("alice", "bob", "eve", "zed")}
    assert (
        table[("zed", A1)]["feedback"] == "kept" and table[("zed", A1)]["score"] == "7"
    )
    assert (
        table[("bob", A1)]["score"] == "0"
        and "\n" not in table[("bob", A1)]["feedback"]
    )
    assert not (root / "grades.csv.tmp").exists()
    text = (root / "feedback" / "bob" / f"{A1}.txt").read_text()
    assert "every part scores 0" in text


def test_the_solution_failing_its_checks_still_stops_grading(tmp_path, monkeypatch):
    "The instructor's problem is not turned into a student's 0."
    root = _mini_course(tmp_path, {"alice": _solution_nb()})

    def fake_run(
        cells,
        checks,
        limit,
        files=None,
        reference=False,
        alone=False,
        seed=None,
        calls=None,
    ):
        return {"cells": {}, "parts": {p: {"error": ["E", "x"]} for p in PARTS}}

    monkeypatch.setattr(grading, "run", fake_run)
    with pytest.raises(course_py.SolutionFails):
        course_py.grade(root, [A1], limit=5, log=lambda *a: None)


# ---- a grading run with honest and hostile submissions side by side -----------------

NO_SANDBOX = sandbox.problem()
needs_sandbox = pytest.mark.skipif(
    NO_SANDBOX is not None, reason=f"grading needs a sandbox: {NO_SANDBOX}"
)
TIMEOUT = 20  # seconds per cell in the run below (the kit's default is 120)

FORGES = """
with open("/out/events.jsonl", "a") as f:
    f.write("[" * 100_000 + "]" * 100_000 + "\\n")
    f.write('{"cell": 1, "error": 5}\\n{"part": ["x"]}\\n')
"""
FIFO = """
import os
os.unlink("/out/events.jsonl")
os.mkfifo("/out/events.jsonl")
"""
LINK = """
import os
os.unlink("/out/events.jsonl")
os.symlink("/submission/a1_soft_attention.ipynb", "/out/events.jsonl")
"""
HANGS = "while True:\n    pass\n"
LINKED = "is a symbolic link: submit"
CRASHES = "import os\nos._exit(3)\n"


def _with(gid: str, code: str, before: bool = True):
    "The solution with `code` run before (or instead of) the solution cell `gid`."

    def edit(nb):
        c = _cell(nb, gid)
        c["source"] = code + ("\n" + grading._text(c["source"]) if before else "")

    return edit


def _metadata_lists(nb):
    nb["metadata"] = []
    _cell(nb, "a1_attend")["metadata"] = ["x"]
    nb["cells"].insert(1, {"cell_type": "code", "metadata": [], "source": "x = 1\n"})


CUSTOMISE = "import builtins\nbuiltins.CUSTOMISED = True\n"
NOT_CUSTOMISED = """import builtins, sys
assert not hasattr(builtins, "CUSTOMISED"), "a customisation file of mine ran"
assert not [p for p in sys.path if p in ("", ".") or p.startswith("/submission")]
"""


def _customises(dest: Path, root: Path) -> None:
    """usercustomize.py and sitecustomize.py wherever Python might look for them (the
    submission folder is the sandbox's current folder and HOME), and a fake
    sat_tutorial package and torch module that would shadow the real ones were the
    folder on sys.path."""
    site = f".local/lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"
    for folder in (dest, dest / site):
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("usercustomize.py", "sitecustomize.py"):
            (folder / name).write_text(CUSTOMISE)
    (dest / "sat_tutorial").mkdir()
    (dest / "sat_tutorial" / "__init__.py").write_text(CUSTOMISE)
    (dest / "torch.py").write_text(CUSTOMISE)


def _links_notebook_to(target: str):
    "The notebook replaced by a link to the instructor's (source) or alice's."

    def extra(dest: Path, root: Path) -> None:
        nb = dest / f"{A1}.ipynb"
        nb.unlink()
        where = {
            "source": root / "source" / A1 / f"{A1}.ipynb",
            "alice": root / "submitted" / "alice" / A1 / f"{A1}.ipynb",
        }
        nb.symlink_to(where[target])

    return extra


def _links_folder(dest: Path, root: Path) -> None:
    shutil.rmtree(dest)
    dest.symlink_to(root / "submitted" / "alice" / A1)


def _links_inside(dest: Path, root: Path) -> None:
    (dest / "a7_run").mkdir()
    (dest / "a7_run" / "best.pt").symlink_to(root / "source" / A1 / "checks.json")


def _has_fifo(dest: Path, root: Path) -> None:
    os.mkfifo(dest / "notes.txt")  # copying it into the sandbox would block


BROKEN = "def attend(*args, **kwargs):\n    raise NotImplementedError\n"


def _duplicated(first_broken: bool):
    """a1_attend twice, as Jupyter's copy and paste leaves it (same grade id): the
    first (the original) broken or the copy broken; and a copied a1_beta_test whose
    copy passes everything."""

    def edit(nb):
        cells = nb["cells"]
        k = cells.index(_cell(nb, "a1_attend"))
        copy = json.loads(json.dumps(cells[k]))
        (cells[k] if first_broken else copy)["source"] = BROKEN
        cells.insert(k + 1, copy)
        t = cells.index(_cell(nb, "a1_beta_test"))
        fake = json.loads(json.dumps(cells[t]))
        fake["source"] = "pass\n"
        cells.insert(t + 1, fake)

    return edit


DUPLICATED = "2 cells with grade id a1_attend (a copied cell keeps it)"

HOSTILE = {
    # student: (how the solution notebook is changed, parts lost, text in its
    # feedback, what else its folder holds)
    "alice": (None, set(), "", None),
    "forger": (_with("a1_beta", FORGES), set(PARTS), "tampered", None),
    "fifo": (_with("a1_beta", FIFO), set(PARTS), "tampered", None),
    "linker": (_with("a1_init", LINK), set(PARTS), "tampered", None),
    "hangs": (_with("a1_beta", HANGS, False), {"a1_beta_test"}, "time limit", None),
    "crashes": (_with("a1_init", CRASHES, False), {"a1_init_test"}, "exit code", None),
    "metadata-lists": (_metadata_lists, set(), "a1_attend is missing", None),
    "customiser": (_with("a1_attend", NOT_CUSTOMISED), set(), "", _customises),
    "linked-to-source": (None, set(PARTS), LINKED, _links_notebook_to("source")),
    "linked-to-alice": (None, set(PARTS), LINKED, _links_notebook_to("alice")),
    "linked-folder": (None, set(PARTS), LINKED, _links_folder),
    "linked-inside": (None, set(PARTS), LINKED, _links_inside),
    "pipe-inside": (None, set(PARTS), "not a regular file", _has_fifo),
    "copy-broken": (_duplicated(False), set(), DUPLICATED, None),
    "original-broken": (_duplicated(True), {"a1_attend_test"}, DUPLICATED, None),
    "zz-honest": (None, set(), "", None),
}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


@pytest.fixture(scope="module")
def hostile_course(tmp_path_factory):
    "One `course.py grade` run (what `make grade` runs) over the HOSTILE submissions."
    tmp = tmp_path_factory.mktemp("hostile")
    students = {}
    for student, (edit, _, _, _) in HOSTILE.items():
        nb = _solution_nb()
        if edit:
            edit(nb)
        students[student] = nb
    root = _mini_course(tmp, students)
    for student, (_, _, _, extra) in HOSTILE.items():
        if extra:
            extra(root / "submitted" / student / A1, root)
    for f in KIT_FILES:
        shutil.copy(KIT / f, root / f)
    csv_path = root / "grades.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, course_py.COLUMNS)
        w.writeheader()
        w.writerow(
            {"student": "zed", "assignment": A1, "score": "7", "max_score": "10"}
            | {"parts": "a1_attend_test=3", "feedback": "graded last week"}
        )
    watched = {
        "source": root / "source" / A1 / f"{A1}.ipynb",
        "checks": root / "source" / A1 / "checks.json",
        "alice": root / "submitted" / "alice" / A1 / f"{A1}.ipynb",
        "zz-honest": root / "submitted" / "zz-honest" / A1 / f"{A1}.ipynb",
        "core": sandbox.package_dir() / "core.py",
        "soft_attention": sandbox.package_dir() / "soft_attention.py",
    }
    before = {k: _digest(p) for k, p in watched.items()}
    t0 = time.monotonic()
    cmd = [sys.executable, str(root / "course.py"), "grade", "--timeout", str(TIMEOUT)]
    with subprocess.Popen(
        [*cmd, "--csv", str(csv_path)],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    ) as proc:
        out, err = proc.communicate(timeout=1800)
    r = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return {
        "root": root,
        "run": r,
        "pid": proc.pid,  # its cgroups are sat-grade-<pid>-*
        "seconds": time.monotonic() - t0,
        "rows": _read_csv(csv_path),
        "changed": {k for k, p in watched.items() if _digest(p) != before[k]},
    }


@needs_sandbox
def test_hostile_run_finishes_and_grades_everyone(hostile_course):
    r = hostile_course["run"]
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    rows = hostile_course["rows"]
    assert set(rows) == {(s, A1) for s in [*HOSTILE, "zed"]}
    zed = rows[("zed", A1)]
    assert (zed["score"], zed["feedback"]) == ("7", "graded last week")
    assert not hostile_course["changed"], hostile_course["changed"]
    left = [
        p
        for c in ("memory", "pids")
        # this run's groups only: other gradings (a parallel test) may hold theirs
        for p in sandbox._own_group(c).glob(f"sat-grade-{hostile_course['pid']}-*")
        if sandbox.cgroup_problem() is None
    ]
    assert not left, f"cgroups left behind: {left}"
    # within its limits: each hostile submission costs at most its own time limits
    assert hostile_course["seconds"] < 20 * 60


@needs_sandbox
@pytest.mark.parametrize("student", sorted(HOSTILE))
def test_hostile_submission_loses_only_its_parts(hostile_course, student):
    _, loses, says, _ = HOSTILE[student]
    row = hostile_course["rows"][(student, A1)]
    parts = dict(p.split("=") for p in row["parts"].split("; "))
    assert set(parts) == set(PARTS), row
    full = {p: float(c["metadata"]["nbgrader"]["points"]) for p, c in _points().items()}
    lost = {p for p, v in parts.items() if float(v) < full[p]}
    assert lost == loses, row["feedback"]
    assert float(row["score"]) == sum(full.values()) - sum(full[p] for p in loses)
    assert says in row["feedback"], row["feedback"]
    assert "\n" not in row["feedback"]
    text = (hostile_course["root"] / "feedback" / student / f"{A1}.txt").read_text()
    assert text.startswith(f"{A1}: {float(row['score']):g}/10")


def _points() -> dict:
    return {
        grading._gid(c): c for c in _source_cells() if grading._meta(c).get("grade")
    }


# ---- the sandbox: no user site, no nested user namespace, one cgroup ---------------


def test_not_plain_refuses_links_and_special_files(tmp_path):
    sub = tmp_path / "submitted" / "bob" / A1
    sub.mkdir(parents=True)
    (sub / f"{A1}.ipynb").write_text("{}")
    (sub / "run").mkdir()
    (sub / "run" / "ok.json").write_text("{}")
    assert grading.not_plain(sub, A1) is None
    (sub / "run" / "x.pt").symlink_to(tmp_path / "nowhere")  # dangling, even
    assert "bob/a1_soft_attention/run/x.pt is a symbolic link" in grading.not_plain(
        sub, A1
    )
    (sub / "run" / "x.pt").unlink()
    os.mkfifo(sub / "run" / "fifo")
    assert "is not a regular file" in _within(10, lambda: grading.not_plain(sub, A1))
    (sub / "run" / "fifo").unlink()
    alias = tmp_path / "submitted" / "mallory"
    alias.symlink_to(tmp_path / "submitted" / "bob")
    assert "your folder is a symbolic link" in grading.not_plain(alias / A1, A1)
    assert grading.not_plain(tmp_path / "submitted" / "nobody" / A1, A1) is None


def test_the_sandbox_command_isolates_python(tmp_path):
    cmd = sandbox.command(
        sandbox.python(["/grader/runner.py"]), tmp_path, tmp_path, KIT
    )
    env = {cmd[i + 1]: cmd[i + 2] for i, a in enumerate(cmd) if a == "--setenv"}
    assert env["PYTHONNOUSERSITE"] == "1" and env["PYTHONSAFEPATH"] == "1"
    assert cmd[-3:] == ["python", "-s", "/grader/runner.py"]
    if "--disable-userns" in sandbox._bwrap_help() and sandbox.userns_flags():
        assert "--disable-userns" in cmd and "--unshare-user" in cmd


def _in_sandbox(argv, work: Path, out: Path, env=None, group=None, timeout=120):
    cmd = sandbox.command(argv, work, out, KIT / "runner.py", env=env)
    return subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=sandbox.limiter(2048, 60, group),
        start_new_session=True,
    )


MARK = "import pathlib\npathlib.Path('/out/{}').write_text('ran')\n"


@needs_sandbox
def test_no_user_or_site_customisation_from_the_submission(tmp_path):
    """With the base interpreter (whose user site is on, unlike a venv's), a
    usercustomize.py under the submission's HOME and a sitecustomize.py in the
    submission folder run without the grader's flags (the control) and not with them."""
    base = Path(sys.base_prefix) / "bin" / "python3"
    if not base.exists():
        pytest.skip(f"no base interpreter at {base}")
    work, out = tmp_path / "work", tmp_path / "out"
    site = work / f".local/lib/python{sys.version_info[0]}.{sys.version_info[1]}"
    (site / "site-packages").mkdir(parents=True)
    (site / "site-packages" / "usercustomize.py").write_text(MARK.format("user"))
    (work / "sitecustomize.py").write_text(MARK.format("site"))
    (work / "usercustomize.py").write_text(MARK.format("cwd"))
    out.mkdir()
    show = "import sys, json; print(json.dumps([sys.flags.no_user_site, sys.path]))"
    control = _in_sandbox(
        [str(base), "-c", "pass"], work, out, env={"PYTHONNOUSERSITE": ""}
    )
    assert control.returncode == 0, control.stderr
    assert (out / "user").exists(), "the control: the base Python reads the user site"
    (out / "user").unlink()
    r = _in_sandbox(sandbox.python(["-c", show], exe=str(base)), work, out)
    assert r.returncode == 0, r.stderr
    flag, path = json.loads(r.stdout)
    assert flag == 1
    assert not [p for p in path if p in ("", ".") or p.startswith("/submission")], path
    assert sorted(p.name for p in out.iterdir()) == [], "a customisation file ran"


@needs_sandbox
def test_no_user_namespace_inside_the_sandbox(tmp_path):
    if not sandbox.userns_flags():
        pytest.skip("this bubblewrap has no working --disable-userns")
    unshare = shutil.which("unshare")
    if not unshare:
        pytest.skip("no unshare(1) to try with")
    out = tmp_path / "out"
    out.mkdir()
    r = _in_sandbox([unshare, "--user", "true"], tmp_path, out)
    assert r.returncode != 0, "a nested user namespace was created in the sandbox"


FORKS = """
import os, time
n = 0
for i in range(60):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(3)
        os._exit(0)
    n += 1
print(n)
"""
HOG = """
import os, pathlib, time
for k in range(3):
    if os.fork() == 0:
        block = b"x" * (200 << 20)  # touched: really resident
        time.sleep(2)
        pathlib.Path(f"/out/held{k}").write_text(str(len(block)))
        os._exit(0)
for k in range(3):
    try:
        os.wait()
    except ChildProcessError:
        break
"""


@needs_sandbox
@pytest.mark.skipif(
    sandbox.cgroup_problem() is not None, reason=str(sandbox.cgroup_problem())
)
def test_the_whole_sandbox_shares_one_process_limit(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    control = _in_sandbox(sandbox.python(["-c", FORKS]), tmp_path, out)
    assert control.stdout.strip() == "60", control.stderr  # no group: all 60 forks
    group = sandbox.Cgroup.make(1024, pids=20)
    assert group is not None
    dirs = list(group.dirs)
    try:
        r = _in_sandbox(sandbox.python(["-c", FORKS]), tmp_path, out, group=group)
    finally:
        group.close()
    assert r.returncode == 0, r.stderr
    assert 0 < int(r.stdout) < 20, r.stdout
    assert len(dirs) == 2 and not any(d.exists() for d in dirs)


@needs_sandbox
@pytest.mark.skipif(
    sandbox.cgroup_problem() is not None, reason=str(sandbox.cgroup_problem())
)
def test_the_whole_sandbox_shares_one_memory_limit(tmp_path):
    "Three children of 200 MiB each under one 300 MiB limit: not all three hold."
    out = tmp_path / "out"
    out.mkdir()
    _in_sandbox(sandbox.python(["-c", HOG]), tmp_path, out)
    held = sorted(p.name for p in out.iterdir())
    assert held == ["held0", "held1", "held2"], "the control: no group, all three hold"
    for p in out.iterdir():
        p.unlink()
    group = sandbox.Cgroup.make(300)
    assert group is not None
    dirs = list(group.dirs)
    try:
        _in_sandbox(sandbox.python(["-c", HOG]), tmp_path, out, group=group)
    finally:
        group.close()
    held = sorted(p.name for p in out.iterdir())
    assert len(held) < 3, held
    assert len(dirs) == 2 and not any(d.exists() for d in dirs), "groups left behind"


# ---- the instructor's path ----------------------------------------------------------


def test_a_copied_grade_id_counts_once_and_is_named():
    nb = _solution_nb()
    _duplicated(True)(nb)
    nb["cells"].append({"cell_type": "code", "metadata": {}, "source": "mine = 1\n"})
    nb["cells"].append({"cell_type": "code", "metadata": {}, "source": "more = 2\n"})
    cells, missing = grading.assemble(_source_cells(), nb)
    assert not missing
    by_id = {c["id"]: c for c in cells}
    assert by_id["a1_attend"]["source"] == BROKEN  # the first, not the copy
    theirs = _cell({"cells": _source_cells()}, "a1_beta_test")["source"]
    assert by_id["a1_beta_test"]["source"] == grading._text(theirs)  # not the copy
    assert [c["source"] for c in cells if c["kind"] == "added"] == [
        "mine = 1\n",
        "more = 2\n",
    ]
    assert len(cells) == len(grading.assemble(_source_cells(), _solution_nb())[0]) + 2
    assert grading.duplicates(_source_cells(), nb) == {
        "a1_attend": 2,
        "a1_beta_test": 2,
    }
    assert grading.duplicates(_source_cells(), _solution_nb()) == {}


def _kit_course(tmp_path: Path, students=("alice",)) -> Path:
    root = _mini_course(tmp_path, {s: _solution_nb() for s in students})
    for f in KIT_FILES:
        shutil.copy(KIT / f, root / f)
    return root


def _listing(root: Path) -> dict:
    return {
        p.relative_to(root).as_posix(): _digest(p) if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


def test_an_unknown_student_is_one_line_and_a_nonzero_exit(tmp_path):
    root = _kit_course(tmp_path)
    before = _listing(root)
    r = subprocess.run(
        [sys.executable, str(root / "course.py"), "grade", "--student", "nobody"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "nobody" in lines[0] and "alice" in lines[0], r.stderr
    assert "graded" not in r.stdout
    assert _listing(root) == before, set(_listing(root)) ^ set(before)
    assert not (root / "grades.csv").exists() and not (root / "feedback").exists()


def test_refused_autograde_changes_nothing(tmp_path):
    pytest.importorskip("nbgrader", reason="the course extra is not installed")
    root = _kit_course(tmp_path)
    before = _listing(root)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    for cmd in (["autograde", A1, "--student", "alice"], ["autograde", A1]):
        r = subprocess.run(
            [sys.executable, "-m", "nbgrader", *cmd],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert r.returncode != 0, r.stdout + r.stderr
        assert "course.py grade" in r.stderr, r.stderr[-2000:]
        assert _listing(root) == before, set(_listing(root)) ^ set(before)
    assert not (root / "gradebook.db").exists()


def test_the_readme_states_the_flags_the_commands_need():
    text = " ".join((KIT / "README.md").read_text(encoding="utf-8").split())
    assert "nbgrader generate_assignment NAME --force" in text
    assert 'make grade ARGS="' in text and "PYTHON=" in text
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target, cmd in (("assignments", "release"), ("grade", "grade")):
        recipe = make.split(f"\n{target}:\n", 1)[1].split("\n\n", 1)[0]
        assert f"assignments/course.py {cmd} $(ARGS)" in recipe, recipe
