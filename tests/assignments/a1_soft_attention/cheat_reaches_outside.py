"""Cheat: reads the instructor's notebook (source/), the cell files and the checks to
execute their solution cells; tries to write the gradebook (a manual score) and the
grades, to replace another student's submission, and to rewrite the package's
check_close and penalty in the checkout the grader imports. It defines nothing else."""

# loses: a1_attend_test a1_beta_test a1_init_test a1_penalty_test
# %% a1_attend
import json
import pathlib

STOLEN = []
for where in (
    "__COURSE__/source/a1_soft_attention/a1_soft_attention.ipynb",
    "__REPO__/assignments/source/a1_soft_attention/a1_soft_attention.ipynb",
    "../../../source/a1_soft_attention/a1_soft_attention.ipynb",
):
    try:
        for cell in json.loads(pathlib.Path(where).read_text())["cells"]:
            if cell["metadata"].get("nbgrader", {}).get("solution"):
                exec("".join(cell["source"]), globals())
                STOLEN.append(where)
    except Exception:
        pass
for where in ("__COURSE__/source/a1_soft_attention/checks.json", "/grader/checks.json"):
    try:
        STOLEN.append(pathlib.Path(where).read_text()[:10])
    except Exception:
        pass
import sqlite3

DONE = []


def attempt(what, fn):
    try:
        fn()
        DONE.append(what)
    except Exception:
        pass


def gradebook():
    db = sqlite3.connect("__COURSE__/gradebook.db")
    db.execute("create table if not exists hacked (x)")
    db.commit()


attempt("gradebook", gradebook)
attempt("grades", lambda: pathlib.Path("__COURSE__/grades.csv").write_text("hacked"))
victim = "__COURSE__/submitted/zz-victim/a1_soft_attention/a1_soft_attention.ipynb"
attempt("victim", lambda: pathlib.Path(victim).write_text("{}"))
for pkg in ("__PACKAGE__", "/pkg/sat_tutorial"):
    for name in ("core.py", "soft_attention.py"):
        attempt(pkg, lambda: open(f"{pkg}/{name}", "a").write("\n# hacked\n"))
assert not STOLEN and not DONE, f"read {STOLEN}, wrote {DONE}"


# %% a1_beta
pass


# %% a1_init
pass


# %% a1_penalty
pass
