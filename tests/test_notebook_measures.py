"""The notebook rules (DESIGN.md): at most 60 minutes to read, no code cell over 80
lines; a paper notebook shows at least three figures and has 3–6 exercises. Minutes
are prose words / 150 + non-space code characters / 400, and cells are counted in
`ruff format`ted lines of at most 88 columns (a longer line counts as the lines it
fills), so joining statements lowers neither. Figures are the images the executed
notebook stores (tools/notebooks.py).

Notebooks that do not meet the rules yet carry their measures in DEBT: they may shrink
but never grow, and one that meets the rules must leave the list (issue 51 works it
off). DEBT holds (minutes, largest cell in lines as written), as measured when the
cells were first formatted."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from notebook_measures import MAX_CELL_LINES, MAX_MINUTES, all_measures  # noqa: E402
from notebooks import REQUIRE_OUTPUTS  # noqa: E402

PAPER_NOTEBOOKS = {
    "03_ram",
    "04_draw",
    "06_soft_attention",
    "07_hard_attention",
    "10_adaptive_attention",
    "11_butd",
    "14_attention_ocr",
    "15_transformer",
}
# notebook: (reading minutes, largest code cell in lines as written), measured when the
# measure became characters and the cells were formatted (issue 50's first step)
DEBT = {
    "13_api": (33.4, 150),
    "13b_cli": (87.6, 170),
}

ROWS = {r["notebook"][: -len(".ipynb")]: r for r in all_measures()}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_notebook_size(name):
    r = ROWS[name]
    meets = r["minutes"] <= MAX_MINUTES and r["largest_cell"] <= MAX_CELL_LINES
    if name in DEBT:
        minutes, largest = DEBT[name]
        assert r["minutes"] <= minutes and r["largest_cell_written"] <= largest, (
            f"{name} grew: {r['minutes']} min (was {minutes}), largest cell "
            f"{r['largest_cell_written']} lines (was {largest})"
        )
        assert not meets, f"{name} meets the rules now: remove it from DEBT"
    else:
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
    if r["figures"] is None and not REQUIRE_OUTPUTS:
        pytest.skip(f"{name} has no stored outputs yet: make notebooks NB={name}")
    assert r["figures"] is not None, (
        f"{name} stores no outputs: run make notebooks NB={name}"
    )
    assert r["figures"] >= 3, f"{name} stores {r['figures']} figures (at least 3)"
    assert 3 <= r["exercises"] <= 6, f"{name} has {r['exercises']} exercises (3 to 6)"


def test_debt_names_existing_notebooks():
    assert set(DEBT) <= set(ROWS), (
        f"DEBT names notebooks that do not exist: {sorted(set(DEBT) - set(ROWS))}"
    )
