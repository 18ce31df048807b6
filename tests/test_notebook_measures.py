"""The notebook rules (DESIGN.md): at most 60 minutes to read, no code cell over 80
lines; a paper notebook shows at least three figures and has 3–6 exercises. Minutes
are prose words / 150 + non-space code characters / 400, and cells are counted in
`ruff format`ted lines of at most 88 columns (a longer line counts as the lines it
fills), so joining statements lowers neither. Figures are the images the executed
notebook stores (tools/notebooks.py). Every notebook meets the rules: one that grows
past them is split, never cut."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from notebook_measures import MAX_CELL_LINES, MAX_MINUTES, PAPERS, all_measures  # noqa: E402

PAPER_NOTEBOOKS = set(PAPERS)
ROWS = {r["notebook"][: -len(".ipynb")]: r for r in all_measures()}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_notebook_size(name):
    r = ROWS[name]
    assert r["minutes"] <= MAX_MINUTES, (
        f"{name} takes {r['minutes']} minutes to read (at most {MAX_MINUTES}): "
        "split it, never cut an explanation"
    )
    assert r["largest_cell"] <= MAX_CELL_LINES, (
        f"{name} has a code cell of {r['largest_cell']} lines of at most 88 "
        f"columns (at most {MAX_CELL_LINES})"
    )


@pytest.mark.parametrize("name", sorted(PAPER_NOTEBOOKS & set(ROWS)))
def test_paper_notebook_figures_and_exercises(name):
    r = ROWS[name]
    assert r["figures"] is not None, (
        f"{name} stores no outputs: run make notebooks NB={name}"
    )
    assert r["figures"] >= 3, f"{name} stores {r['figures']} figures (at least 3)"
    assert 3 <= r["exercises"] <= 6, f"{name} has {r['exercises']} exercises (3 to 6)"
