"""The notebook rules (DESIGN.md): at most 60 minutes to read, no code cell over 80 lines; a paper notebook has at least
three figures and 3–6 exercises. Notebooks written before the rules carry their measures in DEBT: they may shrink but
never grow, and one that meets the rules must leave the list (issue 40 works it off)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from notebook_measures import MAX_CELL_LINES, MAX_MINUTES, all_measures  # noqa: E402

PAPER_NOTEBOOKS = {"03_ram", "04_draw", "06_soft_attention", "07_hard_attention", "10_adaptive_attention", "11_butd",
                   "14_attention_ocr", "15_transformer"}
# notebook: (reading minutes, largest code cell) as measured when the rules came in; paper notebooks listed here are also
# excused from the figure and exercise counts until they leave the list
DEBT = {}   # every notebook meets the rules now (issue 40); a notebook may be listed here only with a reason

ROWS = {r["notebook"][:-len(".ipynb")]: r for r in all_measures()}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_notebook_size(name):
    r = ROWS[name]
    if name in DEBT:
        minutes, largest = DEBT[name]
        assert r["minutes"] <= minutes and r["largest_cell"] <= largest, \
            f"{name} grew: {r['minutes']} min (was {minutes}), largest cell {r['largest_cell']} lines (was {largest})"
        assert r["minutes"] > MAX_MINUTES or r["largest_cell"] > MAX_CELL_LINES, f"{name} meets the rules now: remove it from DEBT"
    else:
        assert r["minutes"] <= MAX_MINUTES, f"{name} takes {r['minutes']} minutes to read (at most {MAX_MINUTES}): split it or cut"
        assert r["largest_cell"] <= MAX_CELL_LINES, f"{name} has a code cell of {r['largest_cell']} lines (at most {MAX_CELL_LINES})"


@pytest.mark.parametrize("name", sorted(PAPER_NOTEBOOKS & set(ROWS) - set(DEBT)))
def test_paper_notebook_figures_and_exercises(name):
    r = ROWS[name]
    assert r["figures"] >= 3, f"{name} has {r['figures']} figure cells (at least 3)"
    assert 3 <= r["exercises"] <= 6, f"{name} has {r['exercises']} exercises (3 to 6)"


def test_debt_names_existing_notebooks():
    assert set(DEBT) <= set(ROWS), f"DEBT names notebooks that do not exist: {sorted(set(DEBT) - set(ROWS))}"
