"""Point tests and notebooks at the shared offline data when it sits beside the
checkout."""

import os
from pathlib import Path

_shared = Path(__file__).resolve().parent.parent / "shared" / "data"
if "SAT_TUTORIAL_DATA" not in os.environ and _shared.is_dir():
    os.environ["SAT_TUTORIAL_DATA"] = str(_shared)
os.environ.setdefault("MPLBACKEND", "Agg")

#: the files that take longest under `make test` (pytest --durations, one thread per
#: worker), longest first. With `-n 2 --dist loadfile` a file runs whole on one worker,
#: in the order collected; one long file collected late kept a worker busy for minutes
#: after the other had finished. Starting the longest ones first lets both finish
#: together. An order only: every file still runs, and a file missing here runs after.
LONGEST_FIRST = (
    "nbs/12g_fit_runs.ipynb",
    "tests/test_assignments.py",
    "tests/test_cli.py",
    "tests/test_pretrained.py",
    "nbs/14_attention_ocr.ipynb",
    "tests/test_imports.py",
    "nbs/04b_draw_training.ipynb",
    "tests/test_grader_reach.py",
    "tests/test_grader_stubs.py",
    "tests/test_training.py",
    "nbs/15b_transformer_beyond.ipynb",
    "nbs/16_pretrained.ipynb",
    "nbs/10_adaptive_attention.ipynb",
    "nbs/11_butd.ipynb",
    "nbs/06_soft_attention.ipynb",
    "tests/test_grader_hostile.py",
    "nbs/07_hard_attention.ipynb",
    "nbs/13d_cli_demo.ipynb",
)


def pytest_collection_modifyitems(config, items):
    "Longest files first (LONGEST_FIRST); the order within a file stays (stable sort)."
    rank = {f: i for i, f in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
