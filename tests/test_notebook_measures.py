"""The notebook rules (DESIGN.md): at most 60 minutes to read, no code cell over 80 lines; a paper notebook has at least
three figures and 3–6 exercises. Minutes are prose words / 150 + non-space code characters / 400 and cells are counted in
`ruff format`ted lines, so joining statements lowers neither. Notebooks that do not meet the rules yet carry their measures
in DEBT: they may shrink but never grow, and one that meets the rules must leave the list (issue 51 works it off)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from notebook_measures import MAX_CELL_LINES, MAX_MINUTES, all_measures  # noqa: E402

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
# notebook: (reading minutes, largest code cell) as measured when the measure became characters and the cells were
# formatted (issue 50's first step): the line-based measure of issue 40 counted joined statements as one line
DEBT = {
    "01_data": (58.6, 138),
    "01b_feature_store": (18.3, 114),
    "03_ram": (71.8, 97),
    "03b_ram_training": (65.6, 181),
    "04_draw": (68.0, 149),
    "04b_draw_training": (46.5, 115),
    "05_encoders": (68.0, 139),
    "06_soft_attention": (77.2, 157),
    "07_hard_attention": (71.9, 147),
    "07b_hard_attention_beyond": (76.3, 168),
    "08_decoding": (48.6, 115),
    "09_metrics": (33.4, 89),
    "10_adaptive_attention": (68.5, 75),
    "11_butd": (63.2, 104),
    "11b_bottom_up": (20.0, 103),
    "12_training": (60.8, 125),
    "12b_optimization": (30.2, 121),
    "12d_training_beyond": (47.7, 88),
    "12e_fit_captioners": (61.9, 90),  # split from 12c_fit (67.0, 90)
    "13_api": (32.3, 140),
    "13b_cli": (87.1, 171),
    "14_attention_ocr": (84.4, 110),
    "15_transformer": (74.0, 140),
}

ROWS = {r["notebook"][: -len(".ipynb")]: r for r in all_measures()}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_notebook_size(name):
    r = ROWS[name]
    if name in DEBT:
        minutes, largest = DEBT[name]
        assert r["minutes"] <= minutes and r["largest_cell"] <= largest, (
            f"{name} grew: {r['minutes']} min (was {minutes}), largest cell {r['largest_cell']} lines (was {largest})"
        )
        assert r["minutes"] > MAX_MINUTES or r["largest_cell"] > MAX_CELL_LINES, (
            f"{name} meets the rules now: remove it from DEBT"
        )
    else:
        assert r["minutes"] <= MAX_MINUTES, (
            f"{name} takes {r['minutes']} minutes to read (at most {MAX_MINUTES}): split it or cut"
        )
        assert r["largest_cell"] <= MAX_CELL_LINES, (
            f"{name} has a code cell of {r['largest_cell']} lines (at most {MAX_CELL_LINES})"
        )


@pytest.mark.parametrize("name", sorted(PAPER_NOTEBOOKS & set(ROWS)))
def test_paper_notebook_figures_and_exercises(name):
    r = ROWS[name]
    assert r["figures"] >= 3, f"{name} has {r['figures']} figure cells (at least 3)"
    assert 3 <= r["exercises"] <= 6, f"{name} has {r['exercises']} exercises (3 to 6)"


def test_debt_names_existing_notebooks():
    assert set(DEBT) <= set(ROWS), (
        f"DEBT names notebooks that do not exist: {sorted(set(DEBT) - set(ROWS))}"
    )
