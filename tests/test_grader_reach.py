"""The course kit's checks out of the student's reach (issue 61, part 2).

Hostile A1 submissions graded by `course.grade` next to the solution (full marks) and
the untouched release (0):

- answers computed ahead: a table of what the solution's functions return on the
  checks' calls, built offline from the checks' source, scores 10/10 when the grader
  uses the seed the table was built for (the control) and 0 with the seed the grader
  draws when it starts;
- feedback as a way out: functions that raise exceptions carrying the checks' source
  (many lines, control and bidi characters, a class named after it), return it as
  outputs, or forge error events holding it get at most the first 120 printable
  characters of each exception into feedback and grades.csv, and nothing of what
  they return.

And in every assignment, a submission whose functions search their process (frames,
gc, modules) and the sandbox's files for the checks (their code, a canary planted next
to the inputs and expected outputs they keep) finds them when the grader sends them
along (the control) and nothing with the grader as it is; the files of calls are data
(weights_only) without the checks.

The graded runs need bubblewrap (they skip, saying why, without it); the two runs of
every assignment take about 5 minutes on 2 busy cores, A1's about 2."""

import json
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


def _source_cells(name: str = A1) -> list[dict]:
    path = KIT / "source" / name / f"{name}.ipynb"
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _checks(name: str = A1) -> dict:
    return json.loads((KIT / "source" / name / "checks.json").read_text())


def _notebook_of(name: str, blank: bool = False) -> dict:
    """The instructor's notebook of `name` as a submission: the solution, or the
    untouched release (`blank`: every solution cell raises NotImplementedError)."""
    nb = {"cells": grading.solution_cells(_source_cells(name)), "nbformat": 4}
    nb["metadata"], nb["nbformat_minor"] = {}, 5
    for c in nb["cells"]:
        if blank and grading._meta(c).get("solution"):
            c["source"] = "# YOUR CODE HERE\nraise NotImplementedError()\n"
    return nb


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


def _plan(part: str, spec: dict, seed: int | None) -> list:
    """A part's steps as make_calls writes them for `seed`; for None, with the fixed
    seeds the checks name (the grader before part 2)."""
    from sat_tutorial.core import seed_everything

    g = grading.check_namespace(spec["code"], part, seed)
    if seed is None:
        g["seed_everything"] = seed_everything
    else:
        g["seed_everything"](f"part {part}")  # as make_calls does before calls()
    kinds = []
    return [grading._step(step, n, kinds) for n, step in enumerate(g["calls"]())]


def answer_table(seed: int | None) -> dict:
    """{function:shapes#call: output}: what the solution's functions return on every
    call A1's checks make, computed in this process from the checks' source (what
    the attack of issue 61 rebuilt from feedback) with the runner's seeding for `seed`,
    or, for None, with the fixed seeds the checks name (the grader before part 2)."""
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
    for part, spec in _checks()["parts"].items():
        runner.execute(_plan(part, spec, seed), calls)
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
import os
import sys
import types

NEEDLES = ("def " + "calls(", "def " + "outputs(", "{canary_head}" + "{canary_tail}")
SKIP = {{"/proc", "/sys", "/dev", "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64"}}
SKIP |= {{sys.prefix, sys.base_prefix, os.path.realpath(sys.prefix)}}


def _check_code(x) -> bool:
    "A function or frame compiled from a check, or a string holding a needle."
    if type(x) is str:
        return x not in NEEDLES and any(n in x for n in NEEDLES)
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


def _in_files() -> bool:
    "A needle in a file of the sandbox (but the system's, Python's and torch's)."
    needles = [n.encode() for n in NEEDLES]
    for top, dirs, names in os.walk("/"):
        dirs[:] = [d for d in dirs if os.path.join(top, d) not in SKIP]
        for name in names:
            path = os.path.join(top, name)
            try:
                if os.path.islink(path) or os.path.getsize(path) > 64 << 20:
                    continue
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            if any(n in data for n in needles):
                return True
    return False


def _search():
    "Where in this process the checks are: frames, gc, modules, files (issue 61)."
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
    if _in_files():
        where.append("files")
    raise LookupError("found: " + (" ".join(where) or "nothing"))


def _searching(fn):
    def searching(*args, **kwargs):
        _search()

    return searching


def _search_instead(cell: str) -> None:
    "Every function the cell `cell` defined searches instead of answering."
    for name, fn in list(globals().items()):
        if name.startswith("_") or type(fn) is not types.FunctionType:
            continue  # the search's own helpers
        if fn.__code__.co_filename == cell:
            globals()[name] = _searching(fn)
"""
CANARY = "reach-canary-" + "7f3e9d21"  # planted in every check (the search's needle)
SEARCH_TAIL = "\n\n_search_instead(sys._getframe().f_code.co_filename)\n"


def searching(name: str) -> dict:
    """The solution of `name` in which every function a solution cell defines searches
    the process for the checks (their code, or the canary planted in them) instead of
    answering, and raises LookupError saying where it found them."""
    nb = _notebook_of(name)
    head = SEARCH_CELL.format(canary_head=CANARY[:9], canary_tail=CANARY[9:])
    first = True
    for c in nb["cells"]:
        if grading._meta(c).get("solution"):
            c["source"] = (head if first else "") + c["source"] + SEARCH_TAIL
            first = False
    return nb


def with_canary(checks: dict, leaky: bool = False) -> dict:
    """`checks` with the canary in every check's code (in what the grader keeps, next to
    the inputs and expected outputs); `leaky`: the control, a grader that also sends
    each check's code to the sandbox (as a folder of files, the last of its steps)."""
    parts = {}
    for part, spec in checks["parts"].items():
        code = spec["code"] + f"\n\nCANARY = {CANARY!r}\n"
        if leaky and not spec["alone"]:
            code = code.replace("def calls(", "def _calls(")
            code += (
                "\n\ndef calls():  # the control: the check's code goes along\n"
                f"    return list(_calls()) + [files({{'check.py': {code!r}}})]\n"
            )
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


def _kit(tmp: Path, assignments: dict) -> Path:
    """A course folder with {name: (checks or None for the kit's, {student: notebook})}
    : each assignment's source (its checks.json replaced by `checks`) and submissions."""
    root = tmp / "course"
    for name, (checks, students) in assignments.items():
        folder = root / "source" / name
        folder.mkdir(parents=True)
        for f in (f"{name}.ipynb", "checks.json"):
            (folder / f).write_bytes((KIT / "source" / name / f).read_bytes())
        if checks is not None:
            (folder / "checks.json").write_text(json.dumps(checks))
        for student, nb in students.items():
            dest = root / "submitted" / student / name
            dest.mkdir(parents=True)
            (dest / f"{name}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    return root


def _course(tmp: Path, students: dict, checks: dict | None = None) -> Path:
    return _kit(tmp, {A1: (checks, students)})


def _grade(root: Path, seed=None, names=(A1,)) -> dict:
    """course.grade over `root`: {'rows': {student: row}, 'log': lines, 'csv': text,
    'feedback': {student: text}}, rows and feedback keyed by (student, name) when
    `names` holds more than A1."""
    lines = []
    csv_path = root / "grades.csv"
    rows = course_py.grade(
        root,
        list(names),
        limit=TIMEOUT,
        jobs=2,
        log=lines.append,
        csv_path=csv_path,
        seed=seed,
    )

    def key(student, name):
        return student if tuple(names) == (A1,) else (student, name)

    feedback = {
        key(p.parent.name, p.stem): p.read_text(encoding="utf-8")
        for p in (root / "feedback").glob("*/*.txt")
    }
    return {
        "rows": {key(r["student"], r["assignment"]): r for r in rows},
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
        },
    )
    return {"control": _grade(control, CONTROL_SEED), "usual": _grade(usual)}


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
    assert len(run["rows"]) == 7


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
    """Whether `line` shares more than n consecutive characters with `source`, not
    counting a space at either end (the grader's own, before an exception's message)."""
    windows = (line[i : i + n + 1] for i in range(len(line) - n))
    return any(w == w.strip() and w in source for w in windows)


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


NAMES = sorted(p.name for p in (KIT / "source").iterdir() if p.is_dir())


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """Two grading runs of every assignment, with the canary planted in every check:
    the control (a grader that sends each check's code to the sandbox with its calls)
    and the grader as it is; each grades a submission whose functions search their
    process (frames, gc, modules, files) instead of answering, the solution and the
    untouched release."""
    control = _kit(
        tmp_path_factory.mktemp("leaky"),
        {
            name: (
                with_canary(_checks(name), leaky=True),
                {"searches": searching(name)},
            )
            for name in NAMES
        },
    )
    usual = _kit(
        tmp_path_factory.mktemp("searched"),
        {
            name: (
                with_canary(_checks(name)),
                {
                    "searches": searching(name),
                    "solution": _notebook_of(name),
                    "blank": _notebook_of(name, blank=True),
                },
            )
            for name in NAMES
        },
    )
    return {
        "control": _grade(control, names=NAMES),
        "usual": _grade(usual, names=NAMES),
    }


def _searched_parts(name: str) -> list[str]:
    "The parts of `name` checked with the student's code (A7's run is not)."
    return sorted(p for p, c in _checks(name)["parts"].items() if not c["alone"])


def test_the_search_finds_its_needles():
    """The search's needles are in every check (the canary), but not in the runner, and
    its own source holds none of them whole."""
    for name in NAMES:
        for spec in with_canary(_checks(name))["parts"].values():
            assert CANARY in spec["code"]
    runner_text = (KIT / "runner.py").read_text(encoding="utf-8")
    assert CANARY not in runner_text
    assert "def calls(" not in runner_text and "def outputs(" not in runner_text
    cell = SEARCH_CELL.format(canary_head=CANARY[:9], canary_tail=CANARY[9:])
    assert CANARY not in cell and "def calls(" not in cell


@needs_sandbox
@pytest.mark.parametrize("name", NAMES)
def test_the_search_finds_checks_sent_to_the_sandbox(searched, name):
    """The control: with each check's code sent along with its calls, the search finds
    it (in the runner's frames and in the calls' file) in every part."""
    row = searched["control"]["rows"][("searches", name)]
    parts = [p for p in row["problems"] if p.split(" ")[0] in _searched_parts(name)]
    assert len(parts) == len(_searched_parts(name)), row["problems"]
    for line in parts:
        found = _found(line)
        assert found and {"frames", "files"} <= set(found[0].split()), line


@needs_sandbox
@pytest.mark.parametrize("name", NAMES)
def test_no_check_in_the_students_process(searched, name):
    """The grader as it is: in every part of every assignment, the student's functions,
    called by the grader's calls (and by the visible tests), find no check code, and
    not the canary kept with the inputs and expected outputs, in frames, gc, modules or
    files."""
    run = searched["usual"]
    row = run["rows"][("searches", name)]
    assert row["score"] == 0, row["problems"]
    parts = [p for p in row["problems"] if p.split(" ")[0] in _searched_parts(name)]
    assert len(parts) == len(_searched_parts(name)), row["problems"]
    text = run["feedback"][("searches", name)]
    found = _found(text)
    assert len(found) >= len(parts), text
    assert set(found) == {"nothing"}, text


@needs_sandbox
@pytest.mark.parametrize("name", NAMES)
def test_solution_full_marks_and_release_zero_with_the_canary(searched, name):
    run = searched["usual"]
    solution, blank = run["rows"][("solution", name)], run["rows"][("blank", name)]
    alone = sum(1 for c in _checks(name)["parts"].values() if c["alone"])
    lost = {p.split(" ")[0] for p in solution["problems"]}
    if alone:  # A7: no run submitted, so its run's parts are lost, and only those
        assert lost == {p for p, c in _checks(name)["parts"].items() if c["alone"]}
    else:
        assert solution["score"] == solution["max_score"], solution["problems"]
    assert blank["score"] == 0, blank["problems"]


def test_the_calls_files_are_data_without_the_checks(tmp_path):
    """Every part's file of calls loads with weights_only (data, no pickled objects),
    and holds neither its check's code nor what the check keeps (the canary)."""
    for name in NAMES:
        checks = with_canary(_checks(name))
        made = grading.make_calls(checks, 5, tmp_path / name)
        assert made == set(_searched_parts(name)), name
        for part in made:
            raw = (tmp_path / name / f"{part}.pt").read_bytes()
            assert CANARY.encode() not in raw and b"def calls(" not in raw, part
            plan = torch.load(tmp_path / name / f"{part}.pt", weights_only=True)
            assert plan and all(type(step) is dict for step in plan), part
            assert CANARY in checks["parts"][part]["kept"]["CANARY"]


def test_the_steps_are_checked_on_the_graders_side():
    kinds = []
    step = grading._step(("f", (torch.ones(2, requires_grad=True),), {}), 0, kinds)
    assert step["call"] == "f" and not step["args"][0].requires_grad
    with pytest.raises(ValueError, match="reference to step 1"):
        grading._step(grading.call("f", grading.ref(1)), 1, [])
    with pytest.raises(ValueError, match="not leaves"):
        grading._step(grading.grad(grading.ref(0), wrt=[0]), 1, ["call"])
    with pytest.raises(TypeError, match="not data"):
        grading._step(grading.call("f", object()), 0, [])
    with pytest.raises(TypeError, match="classes are built"):
        grading.build(dict)


def test_the_runner_makes_the_steps():
    "Refs, a model built from data, a caught exception, a Jacobian, files."
    ns = {
        "double": lambda x: 2 * x,
        "square": lambda x: x**2,
        "fails": lambda: open("/nonexistent/test_metrics.json"),
        "read": lambda folder: (Path(folder) / "a.txt").read_text(),
        "apply": lambda layer, x: layer(x),
    }
    layer = torch.nn.Linear(3, 2)
    size = {"in_features": 3, "out_features": 2}
    steps = [
        grading.call("double", torch.tensor([1.0, 2.0])),
        grading.call("double", grading.ref(0)),
        grading.leaf(torch.tensor([1.0, 3.0])),
        grading.call("square", grading.ref(2)),
        grading.grad(grading.ref(3), wrt=[2], each=True),
        grading.grad(grading.ref(3), wrt=[2]),
        grading.call("fails", catch=True),
        grading.files({"a.txt": "hello"}),
        grading.call("read", grading.ref(7)),
        grading.build(torch.nn.Linear, kwargs=size, state=layer.state_dict()),
        grading.call("apply", grading.ref(9), torch.ones(1, 3)),
    ]
    kinds = []
    plan = [grading._step(s, n, kinds) for n, s in enumerate(steps)]
    got = runner.execute(plan, ns)
    assert got[1].tolist() == [4.0, 8.0] and got[2] is None
    assert got[4][0].tolist() == [[2.0, 0.0], [0.0, 6.0]]
    assert got[5][0].tolist() == [2.0, 6.0]
    assert got[6][:2] == ["raised", "FileNotFoundError"]
    assert "test_metrics.json" in got[6][2] and got[7] is None and got[8] == "hello"
    torch.testing.assert_close(got[10], layer(torch.ones(1, 3)).detach())
    with pytest.raises(ValueError, match="package's and torch.nn's classes only"):
        runner.execute([{"build": "os:system", "args": ("true",)}], ns)
