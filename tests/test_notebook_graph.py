"""The notebook-dependency figure (docs/figures/notebook_dependencies.png) is drawn from
the notebooks' imports by tools/notebook_graph.py, which stores the edges it drew beside
it: when the imports change, the stored edges no longer match and the figure must be
redrawn."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import notebook_graph as ng  # noqa: E402


def test_figure_matches_the_imports():
    g = ng.reduce(ng.needs())
    assert ng.EDGES.is_file() and ng.OUT.is_file(), "run python tools/notebook_graph.py"
    stored = ng.EDGES.read_text(encoding="utf-8")
    assert stored == ng.edges_text(g), (
        "the notebooks' imports changed since the dependency figure was drawn: run "
        "python tools/notebook_graph.py"
    )


def test_paper_notebooks_need_no_later_paper():
    """03 needs only core, the zoo's files and the MNIST loader, 04 the binarised digits
    too; 15 needs nothing past 09."""
    g = ng.needs()
    reach = {a: ng._reach(g, a) for a in g}
    assert reach["03_ram"] == {"00_core", "00d_zoo", "01c_mnist"}
    digits = {
        "00_core",
        "00d_zoo",
        "01c_mnist",
        "01e_mnist_sources",
        "01f_binarized_mnist",
    }
    assert reach["04_draw"] == digits
    assert all(n[:2] <= "09" for n in reach["15_transformer"]), reach["15_transformer"]
    assert "03_ram" not in reach["04_draw"]


def test_reduction_drops_implied_edges():
    g = {"a": set(), "b": {"a"}, "c": {"a", "b"}}
    assert ng.reduce(g) == {"a": set(), "b": {"a"}, "c": {"b"}}


def test_the_learner_and_run_notebooks_stand_on_core():
    """The learning layer (12a's settings, 12c's Learner, 12f's run format, 12h's run
    folder) needs only the 00 notebooks (core, ranges, flags, checkpoints, the zoo's
    files); RAM's and DRAW's training reach no captioning notebook, and the OCR
    notebooks none of the captioners' training (issue 60)."""
    g = ng.needs()
    reach = {a: ng._reach(g, a) for a in g}
    zero = {"00_core", "00a_ranges", "00b_flags", "00c_checkpoints", "00d_zoo"}
    learning = zero | {"12a_step_settings", "12c_fit", "12f_runs", "12h_run_folder"}
    learning |= {"12i_data_order"}
    assert reach["12a_step_settings"] <= zero
    assert reach["12c_fit"] <= zero | {"12a_step_settings"}
    assert reach["12f_runs"] <= learning
    assert reach["12h_run_folder"] <= zero
    assert reach["12i_data_order"] <= zero
    digits = learning | {"01c_mnist", "01e_mnist_sources", "01f_binarized_mnist"}
    digits |= {"03_ram", "03b_ram_training", "04_draw"}
    for nb in ("03b_ram_training", "03c_ram_runs", "04b_draw_training", "04c_draw_cli"):
        assert reach[nb] <= digits | {"04b_draw_training"}, (nb, reach[nb] - digits)
    training = {"12_training", "12b_optimization", "12e_fit_captioners"}
    for nb in (
        "14_attention_ocr",
        "14b_word_images",
        "14c_ocr_cli",
        "14d_ocr_training",
    ):
        assert not reach[nb] & training, (nb, reach[nb] & training)


def test_readme_states_each_papers_prerequisites():
    """README's "Start here" table of minutes before each paper is what the notebooks'
    imports and reading measures give now."""
    import re

    readme = (ng.ROOT / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \([^)]*\) \| (\d+) \| (\d+) \|$", readme, re.M)
    full = ng.needs()
    assert [r[0] for r in rows] == list(ng.PAPERS)
    for stem, minutes, count in rows:
        pre = ng.prerequisites(stem, full)
        assert (int(minutes), int(count)) == (round(sum(pre.values())), len(pre)), stem


def test_the_short_paths_to_ram_and_soft_attention_hold():
    """The aims of issue 60: at most 45 minutes to read before RAM, and at most 90
    before Show, Attend and Tell, counted over what each imports."""
    full = ng.needs()
    assert sum(ng.prerequisites("03_ram", full).values()) <= 45
    assert sum(ng.prerequisites("06_soft_attention", full).values()) <= 90
