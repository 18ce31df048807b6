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
    "03 and 04 need only 00 and the MNIST loader; 15 needs nothing past 09."
    g = ng.needs()
    reach = {a: ng._reach(g, a) for a in g}
    assert reach["03_ram"] <= {"00_core", "01c_mnist"}
    assert reach["04_draw"] <= {"00_core", "01c_mnist"}
    assert all(n[:2] <= "09" for n in reach["15_transformer"]), reach["15_transformer"]
    assert "03_ram" not in reach["04_draw"]


def test_reduction_drops_implied_edges():
    g = {"a": set(), "b": {"a"}, "c": {"a", "b"}}
    assert ng.reduce(g) == {"a": set(), "b": {"a"}, "c": {"b"}}
