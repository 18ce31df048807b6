"""The course kit's checks out of the student's reach (issue 61, part 2).

Each attack is a hostile A1 submission graded by `course.grade` next to the solution
(full marks) and the untouched release (0):

- answers computed ahead: a table of what the solution's functions return on the
  probes' calls, built offline from the probes' source, scores 10/10 when the grader
  uses the seed the table was built for (the control) and 0 with the seed the grader
  draws when it starts;
- feedback as a way out: functions that raise exceptions carrying the probes' source
  (many lines, control and bidi characters, a class named after it), return it as
  outputs, or forge error events holding it get at most the first 120 printable
  characters of each exception into feedback and grades.csv, and nothing of what
  they return.

The graded runs need bubblewrap (they skip, saying why, without it); one grading run of
A1 takes about a minute on 2 busy cores (a sandbox per submission imports torch)."""

import builtins
import json
import math
import re
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "assignments"
sys.path.insert(0, str(KIT))
import course as course_py  # noqa: E402
import grading  # noqa: E402
import runner  # noqa: E402
import sandbox  # noqa: E402

A1 = "a1_soft_attention"
PARTS = ("a1_attend_test", "a1_beta_test", "a1_init_test", "a1_penalty_test")
FUNCS = {  # the solution cell of each function the probes call, and its tensors
    "attend": ("a1_attend", "att, feats, h", "feats, h"),
    "gated_context": ("a1_beta", "f_beta, h, z", "h, z"),
    "init_lstm_state": ("a1_init", "init_h, init_c, feats", "feats,"),
    "penalty": ("a1_penalty", "alpha, mask", "alpha, mask"),
}
TIMEOUT = 30  # seconds per cell (the kit's default is 120)
NO_SANDBOX = sandbox.problem()
needs_sandbox = pytest.mark.skipif(
    NO_SANDBOX is not None, reason=f"grading needs a sandbox: {NO_SANDBOX}"
)


def _source_cells() -> list[dict]:
    nb = json.loads((KIT / "source" / A1 / f"{A1}.ipynb").read_text(encoding="utf-8"))
    return nb["cells"]


def _checks() -> dict:
    return json.loads((KIT / "source" / A1 / "checks.json").read_text())


def _notebook(sources: dict | None = None, blank: bool = False) -> dict:
    """The instructor's A1 notebook as a submission: the solution, the untouched
    release (`blank`: every solution cell raises NotImplementedError, as nbgrader
    leaves it) or the solution with the cells of `sources` replaced."""
    nb = {"cells": grading.solution_cells(_source_cells()), "nbformat": 4}
    nb["metadata"], nb["nbformat_minor"] = {}, 5
    for c in nb["cells"]:
        gid = grading._gid(c)
        if blank and grading._meta(c).get("solution"):
            c["source"] = "# YOUR CODE HERE\nraise NotImplementedError()\n"
        elif sources and gid in sources:
            c["source"] = sources[gid]
    return nb


def _key(name: str, tensors) -> str:
    return name + ":" + ";".join(str(tuple(t.shape)) for t in tensors)


def _plain(x):
    if isinstance(x, torch.Tensor):
        return {"dtype": str(x.dtype).replace("torch.", ""), "data": x.tolist()}
    return {"tuple": [_plain(v) for v in x]}


def answer_table(seed: int | None) -> dict:
    """{function:shapes#call: output}: what the solution's functions return on every
    call A1's probes make, computed in this process from the probes' source (what
    the attack of issue 61 rebuilt from feedback) with the runner's seeding for `seed`,
    or, for None, with the fixed seeds the probes name (the grader before part 2)."""
    from sat_tutorial.core import seed_everything

    ns = {"__name__": "solution"}
    for c in grading.solution_cells(_source_cells()):
        if c["cell_type"] == "code" and not grading._meta(c).get("grade"):
            exec(compile(c["source"], "<solution>", "exec"), ns)
    table, counts = {}, {}

    def recording(name):
        def call(*args, **kwargs):
            out = ns[name](*args, **kwargs)
            key = _key(name, [a for a in args if isinstance(a, torch.Tensor)])
            k = counts[key] = counts.get(key, -1) + 1
            table[f"{key}#{k}"] = _plain(out)
            return out

        return call

    calls = {name: recording(name) for name in FUNCS}
    if seed is None:
        seeded, fresh = seed_everything, lambda n: n
    else:
        seeded, fresh = runner.seeding(seed)
    for part, spec in _checks()["parts"].items():
        g = {"__builtins__": builtins, "torch": torch, "math": math, "shared": {}}
        g |= {"seed_everything": seeded, "fresh_seed": fresh, "need": runner.need}
        if seed is not None:
            seeded(f"part {part}")  # as the runner does before each probe
        exec(compile(spec["code"], f"<check {part}>", "exec"), g)
        if "calls" in g:  # the calls the grader makes, by name
            for name, args, kwargs in g["calls"]():
                calls[name](*args, **kwargs)
        else:
            g["probe"](calls)
    return table


TABLE_CELL = '''import json
import torch

TABLE = json.loads(r"""{table}""")
CALLS = {{}}


def _answer(name, tensors):
    key = name + ":" + ";".join(str(tuple(t.shape)) for t in tensors)
    k = CALLS[key] = CALLS.get(key, -1) + 1
    return _build(TABLE.get(f"{{key}}#{{k}}"))


def _build(x):
    if x is None:
        return None  # not a call the table knows: the visible tests fail
    if "tuple" in x:
        return tuple(_build(v) for v in x["tuple"])
    return torch.tensor(x["data"], dtype=getattr(torch, x["dtype"]))
'''


def table_cheat(table: dict) -> dict:
    "A1's solution cells as a student who answers from `table` writes them."
    cells = {}
    for name, (gid, params, tensors) in FUNCS.items():
        body = f"def {name}({params}):\n    return _answer({name!r}, ({tensors}))\n"
        cells[gid] = body
    first = FUNCS["attend"][0]
    cells[first] = TABLE_CELL.format(table=json.dumps(table)) + "\n\n" + cells[first]
    return cells


SOURCE_CELL = """import json
import os

SOURCE = {source}  # the checks' code, as a student who got it holds it


def _leak(k, n=600):
    "An exception named after, and carrying, a piece of SOURCE on many lines."
    piece = SOURCE[k * n : (k + 1) * n]
    cls = type("Leak" + piece[:200], (Exception,), {{}})
    return cls("\\x1b[31m\\u202e" + piece.replace("\\n", " ") + "\\r\\n" + SOURCE)
"""
RAISES = {  # each function raises a piece of the source (in the visible tests too)
    "a1_attend": "def attend(att, feats, h):\n    raise _leak(0)\n",
    "a1_beta": "def gated_context(f_beta, h, z):\n    raise _leak(1)\n",
    "a1_init": "def init_lstm_state(init_h, init_c, feats):\n    raise _leak(2)\n",
    "a1_penalty": "def penalty(alpha, mask):\n    raise _leak(3)\n\n\nraise _leak(4)\n",
}
RETURNS = {  # each function returns the source, as strings and as class names
    "a1_attend": "def attend(att, feats, h):\n    return SOURCE, SOURCE[:99]\n",
    "a1_beta": "def gated_context(f_beta, h, z):\n    return {SOURCE[:300]: SOURCE}\n",
    "a1_init": "def init_lstm_state(init_h, init_c, feats):\n"
    "    return [SOURCE[k : k + 200] for k in range(0, 2000, 200)], SOURCE\n",
    "a1_penalty": "def penalty(alpha, mask):\n"
    "    return type(SOURCE[:1000], (), {})()\n",
}
FORGES = """
with open("/out/events.jsonl", "a") as f:  # well-formed events the runner never wrote
    for k, part in enumerate(PARTS):
        msg = SOURCE[k * 900 :].replace("\\n", " ")
        event = {"part": part, "error": [SOURCE[:500], msg + "\\n" + SOURCE]}
        f.write(json.dumps(event) + "\\n")
"""


SEARCH_CELL = """import gc
import sys
import types


def _check_code(x) -> bool:
    "A function compiled from a check, or check code (a string holding its marker)."
    if type(x) is str:
        return ("def " + "outputs(results)") in x
    if type(x) is types.FrameType:
        return x.f_code.co_filename.startswith("<check")
    return type(x) is types.FunctionType and (
        x.__code__.co_filename.startswith("<check")
    )


def _holds(x, depth=0) -> bool:
    if _check_code(x):
        return True
    if depth < 4 and type(x) is dict:
        return any(_holds(v, depth + 1) for v in list(x.values())[:10000])
    if depth < 4 and type(x) in (list, tuple):
        return any(_holds(v, depth + 1) for v in list(x)[:10000])
    return False


def _search():
    "Where in this process the checks' code is: frames, gc, modules (issue 61)."
    where, f = [], sys._getframe(2)
    while f is not None:
        if _holds(dict(f.f_locals)) or _holds(f.f_globals) or _check_code(f):
            where.append("frames")
            break
        f = f.f_back
    for o in gc.get_objects():
        if _check_code(o) or (type(o) is dict and _holds(o, 3)):
            where.append("gc")
            break
    modules = [m.__dict__ for m in list(sys.modules.values())]
    if any(type(d) is dict and _holds(d, 3) for d in modules):
        where.append("modules")
    raise LookupError("found: " + (" ".join(where) or "nothing"))
"""
SEARCHES = {
    "a1_attend": SEARCH_CELL + "\n\ndef attend(att, feats, h):\n    _search()\n",
    "a1_beta": "def gated_context(f_beta, h, z):\n    _search()\n",
    "a1_init": "def init_lstm_state(init_h, init_c, feats):\n    _search()\n",
    "a1_penalty": "def penalty(alpha, mask):\n    _search()\n",
}
IN_PROCESS = """

def probe(ns):  # the grader before part 2: the check's code runs with the student's
    return [need(ns, name)(*args, **kwargs) for name, args, kwargs in _calls()]
"""


def in_process(checks: dict) -> dict:
    "A1's checks as probes that run in the student's process (the control)."
    parts = {}
    for part, spec in checks["parts"].items():
        code = spec["code"].replace("def calls(", "def _calls(") + IN_PROCESS
        parts[part] = {**spec, "code": code}
    return {**checks, "parts": parts}


def _source_text() -> str:
    return "\n".join(c["code"] for c in _checks()["parts"].values())


def leaking(cells: dict, extra: str = "") -> dict:
    """A1's solution with the cells `cells` (None: the solution's own); the first
    starts with SOURCE (and `extra`)."""
    theirs = {grading._gid(c): c["source"] for c in _notebook()["cells"]}
    out = {gid: theirs[gid] if src is None else src for gid, src in cells.items()}
    first = next(iter(cells))
    head = SOURCE_CELL.format(source=repr(_source_text()))
    head += f"PARTS = {list(PARTS)!r}\n" + extra
    out[first] = head + "\n\n" + out[first]
    return out


def _course(tmp: Path, students: dict, checks: dict | None = None) -> Path:
    root = tmp / "course"
    root.mkdir(parents=True)
    (root / "source").mkdir()
    (root / "source" / A1).mkdir()
    for f in (f"{A1}.ipynb", "checks.json"):
        (root / "source" / A1 / f).write_bytes((KIT / "source" / A1 / f).read_bytes())
    if checks is not None:
        (root / "source" / A1 / "checks.json").write_text(json.dumps(checks))
    for student, nb in students.items():
        dest = root / "submitted" / student / A1
        dest.mkdir(parents=True)
        (dest / f"{A1}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    return root


def _grade(root: Path, seed=None) -> dict:
    "course.grade over `root` (A1): {'rows': {student: row}, 'log': lines, ...}."
    lines = []
    csv_path = root / "grades.csv"
    rows = course_py.grade(
        root, [A1], limit=TIMEOUT, log=lines.append, csv_path=csv_path, seed=seed
    )
    feedback = {
        p.parent.name: p.read_text(encoding="utf-8")
        for p in (root / "feedback").glob(f"*/{A1}.txt")
    }
    return {
        "rows": {r["student"]: r for r in rows},
        "log": lines,
        "csv": csv_path.read_text(encoding="utf-8"),
        "feedback": feedback,
    }


def test_probe_inputs_follow_the_grading_seed():
    "Two seeds, two sets of probe inputs (and answers); one seed, the same ones."
    assert runner.mix(1, 11) != runner.mix(2, 11) != runner.mix(2, 12)
    assert 0 <= runner.mix(2**32 - 1, "part x") < 2**31
    one, again, other = answer_table(7), answer_table(7), answer_table(8)
    assert one.keys() == other.keys() and len(one) == 7, sorted(one)
    assert one == again
    assert all(one[k] != other[k] for k in one), "an answer that ignores the seed"


CONTROL_SEED = 123_456_789


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Two grading runs of A1: the control (the seed the second table was built for)
    and an ordinary one (a seed the grader draws), each with its own submissions."""
    old, known = answer_table(None), answer_table(CONTROL_SEED)
    control = _course(
        tmp_path_factory.mktemp("control"),
        {"table-known-seed": _notebook(table_cheat(known))},
    )
    in_proc = _course(
        tmp_path_factory.mktemp("in-process"),
        {"searches": _notebook(SEARCHES)},
        in_process(_checks()),
    )
    usual = _course(
        tmp_path_factory.mktemp("usual"),
        {
            "blank": _notebook(blank=True),
            "solution": _notebook(),
            "table-fixed-seeds": _notebook(table_cheat(old)),
            "table-known-seed": _notebook(table_cheat(known)),
            "raises-source": _notebook(leaking(RAISES)),
            "returns-source": _notebook(leaking(RETURNS)),
            "forges-errors": _notebook(leaking({"a1_attend": None}, FORGES)),
            "searches": _notebook(SEARCHES),
        },
    )
    return {
        "control": _grade(control, CONTROL_SEED),
        "in-process": _grade(in_proc),
        "usual": _grade(usual),
    }


@needs_sandbox
def test_a_table_for_the_seed_in_use_would_score_full_marks(graded):
    "The control: the table attack works when the grader's seed is known."
    row = graded["control"]["rows"]["table-known-seed"]
    assert row["score"] == 10, row["problems"]
    assert f"grading seed {CONTROL_SEED}" in graded["control"]["log"][0]


@needs_sandbox
@pytest.mark.parametrize(
    "student, score",
    [
        ("solution", 10),
        ("blank", 0),
        ("table-fixed-seeds", 0),  # the attack of issue 61: the probes' own seeds
        ("table-known-seed", 0),  # a table for another grading run's seed
    ],
)
def test_answers_computed_ahead_score_nothing(graded, student, score):
    row = graded["usual"]["rows"][student]
    assert row["score"] == score, row["problems"]
    if student.startswith("table"):  # and the visible tests caught it
        assert row.get("tests"), row


@needs_sandbox
def test_the_grading_seed_is_logged_and_never_shown_to_students(graded):
    run = graded["usual"]
    first = run["log"][0]
    assert first.startswith("grading seed "), run["log"]
    seed = first.split()[2]
    assert int(seed) != CONTROL_SEED
    for text in [run["csv"], *run["feedback"].values()]:
        assert seed not in text
    assert set(run["feedback"]) == set(run["rows"])
    assert len(run["rows"]) == 8


def test_first_line_keeps_one_short_printable_line():
    from grading import SHORT, first_line

    for sep in ("\n", "\r", "\u2028", "\x85", "\x0b", "\x1c"):
        assert first_line(f"one{sep}two") == "one"
    assert first_line("\x1b[31mred\u202e\ttext\x00") == "[31mred text"
    assert first_line("x" * 5000) == "x" * SHORT == "x" * 120
    assert first_line(None) == first_line("") == first_line("\n\nlater") == ""
    name, msg = grading._event(
        {"part": "p", "error": ["Leak def probe(ns):\n" * 20, "a" * 500 + "\nb"]},
        0,
        {"p"},
    )["error"]
    assert name == "Leakdefprobens" * 3 and msg == "a" * 120


def _longest_shared(line: str, source: str, n: int) -> bool:
    "Whether `line` shares more than n consecutive characters with `source`."
    return any(line[i : i + n + 1] in source for i in range(len(line) - n))


@needs_sandbox
@pytest.mark.parametrize(
    "student, least",
    [("raises-source", 60), ("returns-source", 0), ("forges-errors", 60)],
)
def test_feedback_carries_at_most_a_short_first_line(graded, student, least):
    """Every line of the feedback and of the grades.csv row: printable, and sharing at
    most 120 consecutive characters with the probes' source (the first line of one
    exception); `least`: the control, the exception's first line did get through."""
    run = graded["usual"]
    row = run["rows"][student]
    assert row["score"] == 0, row["problems"]
    source = " ".join(_source_text().split())
    text = run["feedback"][student]
    csv_row = next(x for x in run["csv"].splitlines() if x.startswith(student + ","))
    lines = text.splitlines() + [csv_row] + csv_row.split(" | ")
    assert all(line.isprintable() for line in lines), lines
    assert not any(_longest_shared(line, source, 120) for line in lines), text
    if least:  # the control: the attack's first line is there, cut
        assert any(_longest_shared(line, source, least) for line in lines), text
    else:  # nothing the student's functions returned is shown by the grader
        parts = [line for line in text.splitlines() if line.startswith("  - a1_")]
        assert len(parts) == 4, text
        shown = (
            r"(a string of \d+ characters|an? \w+ of \d+ items|a value of another kind)"
        )
        for line in parts:  # the grader's label of the output, and its kind only
            assert re.fullmatch(
                rf"  - a1_\w+ \(0/\d\): [^:]+: a tensor was expected, got {shown}", line
            ), line
    assert len(text) < 4000, len(text)


def _found(text: str) -> list[str]:
    "What the searching submission's exceptions say, one per line that has one."
    return re.findall(r"LookupError: found: ([a-z ]+)", text)


@needs_sandbox
def test_the_search_finds_probes_that_run_with_the_student(graded):
    """The control: with the checks run in the student's process (the grader before
    part 2), the search finds their code in the frames above the student's function."""
    run = graded["in-process"]
    row = run["rows"]["searches"]
    assert row["score"] == 0, row["problems"]
    parts = [p for p in row["problems"] if p.startswith("a1_")]
    assert len(parts) == 4 and all("frames" in f for f in _found("\n".join(parts)))


@needs_sandbox
def test_no_check_code_in_the_students_process(graded):
    """Frames, gc and modules of the student's process hold no check code: its
    functions, called by the visible tests and by the grader's calls, find nothing."""
    row = graded["usual"]["rows"]["searches"]
    assert row["score"] == 0, row["problems"]
    text = graded["usual"]["feedback"]["searches"]
    found = _found(text)
    assert len(found) == 8, text  # 4 parts, 4 visible tests
    assert set(found) == {"nothing"}, text
