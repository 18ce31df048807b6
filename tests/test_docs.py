"""The book's build (docs/build.py) on two small notebooks: figures embedded, math
markup, nbdev directives respected, API pages linked, nothing loaded from the network,
and execution cached per notebook.

The browser check (docs/check.py, `make docs-check`) needs Chromium and runs on the full
site instead.
"""

import importlib.util
import os
import re
from pathlib import Path

import pytest

for _mod in ("sphinx", "myst_nb", "sphinx_book_theme"):
    pytest.importorskip(
        _mod,
        reason=f"the docs toolchain ({_mod}) is not installed: "
        "pip install -e '.[docs]'",
    )
import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("docs_build", ROOT / "docs" / "build.py")
build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build)


def _runs_cell(name):
    # Each execution of a notebook appends its name, so the test sees which notebooks
    # really ran.
    return new_code_cell(
        "import os\nwith open(os.environ['DOCS_TEST_RUNS'], 'a') as f: "
        f"f.write('{name}\\n')"
    )


def _alpha():
    return new_notebook(
        cells=[
            new_code_cell("#| default_exp core"),
            new_markdown_cell(
                "# Alpha notebook\n\nThe weights\n\n$$\\alpha_i = "
                "\\frac{e^{x_i}}{\\sum_j e^{x_j}}$$\n\n"
                "sum to one, and inline $x_i$ is math too. A display inside a "
                "paragraph,"
                "\n$$\\beta = 1$$\nis display math (as Jupyter shows it)."
            ),
            _runs_cell("alpha"),
            new_code_cell(
                '#| export\ndef double(x):\n    "Twice x."\n    return 2 * x'
            ),
            new_code_cell("#| hide\nprint('HIDDEN' + '-CELL-OUTPUT')"),
            new_code_cell(
                "#| eval: false\nraise RuntimeError('this cell must not run')"
            ),
            new_code_cell(
                "import matplotlib.pyplot as plt\nplt.plot([0, 1], [1, 0]); "
                "plt.title('a line'); plt.show()"
            ),
            new_code_cell("# NBVAL_CHECK_OUTPUT\nprint('double:', double(21))"),
        ],
        metadata={
            "kernelspec": {
                "name": "python3",
                "display_name": "python3",
                "language": "python",
            }
        },
    )


def _beta(value):
    return new_notebook(
        cells=[
            new_markdown_cell("# Beta notebook\n\nNo module here."),
            _runs_cell("beta"),
            new_code_cell(f"print('beta value', {value})"),
        ],
        metadata={
            "kernelspec": {
                "name": "python3",
                "display_name": "python3",
                "language": "python",
            }
        },
    )


def _build(tmp_path, work):
    return build.build(
        tmp_path / "site",
        work,
        nbs=sorted((tmp_path / "nbs").glob("*.ipynb")),
        mathjax=tmp_path / "tex-svg-full.js",
        results=[tmp_path / "RESULTS.md"],
        quiet=True,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("book")
    (tmp / "nbs").mkdir()
    nbformat.write(_alpha(), tmp / "nbs" / "00_alpha.ipynb")
    nbformat.write(_beta(1), tmp / "nbs" / "01_beta.ipynb")
    # stands in for MathJax: this test reads HTML, the browser check (docs/check.py)
    # runs MathJax
    (tmp / "tex-svg-full.js").write_text("/* stands in for MathJax */")
    (tmp / "RESULTS.md").write_text("# Measured results\n\nA table would be here.\n")
    runs = tmp / "runs.log"
    old = os.environ.get("DOCS_TEST_RUNS")
    os.environ["DOCS_TEST_RUNS"] = str(runs)
    try:
        docs = _build(tmp, tmp / "work")
        first = runs.read_text().split()
        nbformat.write(
            _beta(2), tmp / "nbs" / "01_beta.ipynb"
        )  # change one notebook's code, rebuild
        _build(tmp, tmp / "work")
        second = runs.read_text().split()[len(first) :]
    finally:
        if old is None:
            del os.environ["DOCS_TEST_RUNS"]
        else:
            os.environ["DOCS_TEST_RUNS"] = old
    return dict(root=tmp, out=tmp / "site", docs=docs, first=first, second=second)


def test_reading_order_and_pages(site):
    assert site["docs"] == ["nbs/00_alpha", "nbs/01_beta"]
    index = (site["out"] / "index.html").read_text()
    assert index.index("nbs/00_alpha.html") < index.index("nbs/01_beta.html")
    for page in [
        "options.html",
        "api/core.html",
        "results/RESULTS.html",
        "search.html",
        "searchindex.js",
    ]:
        assert (site["out"] / page).is_file(), page
    assert "sat-tutorial train" in (site["out"] / "options.html").read_text()


def test_execution_cached_per_notebook(site):
    assert sorted(site["first"]) == ["alpha", "beta"]
    assert site["second"] == ["beta"]  # alpha's outputs came from the cache
    assert "beta value 2" in (site["out"] / "nbs" / "01_beta.html").read_text()
    assert not (
        site["root"] / "jupyter_execute"
    ).exists()  # myst-nb's outputs stay in the work folder


def test_figures_embedded_and_math_marked(site):
    html = (site["out"] / "nbs" / "00_alpha.html").read_text()
    imgs = re.findall(r'<img[^>]*src="([^"]+)"', html)
    assert imgs, "the matplotlib figure is not in the page"
    for src in imgs:
        data = (site["out"] / "nbs" / src).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    assert re.search(r'class="math notranslate nohighlight">\s*\\\[\\alpha_i', html)
    assert re.search(
        r'<span class="math notranslate nohighlight">\\\(x_i\\\)</span>', html
    )
    assert re.search(
        r'<div class="math notranslate nohighlight">\s*\\\[\\beta = 1\\\]</div>', html
    )
    assert re.search(r'<script[^>]*src="../_static/mathjax/tex-svg-full.js', html)
    assert (
        (site["out"] / "_static" / "mathjax" / "tex-svg-full.js")
        .read_text()
        .startswith("/* stands in")
    )


def test_nbdev_directives(site):
    html = (site["out"] / "nbs" / "00_alpha.html").read_text()
    assert "HIDDEN" not in html  # `#| hide`: neither source nor output
    assert (
        "this cell must not run" in html and "Traceback" not in html
    )  # `#| eval: false`: shown, not run
    assert "double: 42" in html
    for page in (site["out"] / "nbs").glob("*.html"):
        text = page.read_text()
        assert "#|" not in text and "NBVAL" not in text and "default_exp" not in text, (
            page.name
        )


def test_api_pages_linked(site):
    alpha = (site["out"] / "nbs" / "00_alpha.html").read_text()
    assert 'href="../api/core.html"' in alpha
    assert (
        "the module this notebook exports"
        not in (site["out"] / "nbs" / "01_beta.html").read_text()
    )  # no module
    api = (site["out"] / "api" / "core.html").read_text()
    from sat_tutorial import core

    for name in core.__all__:
        assert f'id="sat_tutorial.core.{name}"' in api, name
    assert 'href="../nbs/00_alpha.html"' in api


def test_nothing_from_the_network(site, tmp_path):
    assert build.external_refs(site["out"]) == []
    # ...and the scan does find what a theme or CDN would add
    (tmp_path / "p.html").write_text(
        '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=X">'
        '<script src="//cdn.example.org/x.js"></script><img src="http://e.org/a.png">'
        '<script src="_static/local.js"></script><a href="https://example.org">ok</a>'
    )
    (tmp_path / "s.css").write_text(
        '@import "https://fonts.googleapis.com/css2";\nb{background:url(x.png)}'
    )
    assert len(build.external_refs(tmp_path)) == 4


def test_failing_notebook_fails_the_build(tmp_path):
    (tmp_path / "nbs").mkdir()
    nbformat.write(
        new_notebook(
            cells=[new_markdown_cell("# Broken"), new_code_cell("1 / 0")],
            metadata={
                "kernelspec": {
                    "name": "python3",
                    "display_name": "python3",
                    "language": "python",
                }
            },
        ),
        tmp_path / "nbs" / "00_broken.ipynb",
    )
    (tmp_path / "tex-svg-full.js").write_text("")
    (tmp_path / "RESULTS.md").write_text("# Results\n")
    with pytest.raises(build.BuildError, match="sphinx-build failed"):
        _build(tmp_path, tmp_path / "work")


def test_directive_mapping():
    nb = new_notebook(
        cells=[
            new_code_cell("#| default_exp scenes"),
            new_code_cell("#|hide\nx = 1"),
            new_code_cell("#| eval:false\ny = 2"),
            new_code_cell("#| export\n# NBVAL_SKIP\nz = 3"),
            new_code_cell("#| echo: false\nw = 4"),
        ]
    )
    assert build.stage_notebook(nb, api_link=False) == "scenes"
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    assert tags == [
        ["remove-cell"],
        ["remove-cell"],
        ["skip-execution"],
        [],
        ["remove-input"],
    ]
    assert [c.source for c in nb.cells] == ["", "x = 1", "y = 2", "z = 3", "w = 4"]


def test_missing_mathjax_is_one_clear_error(tmp_path):
    with pytest.raises(build.BuildError, match="MathJax not found at .*npm install"):
        build.build(
            tmp_path / "site",
            tmp_path / "work",
            nbs=[ROOT / "nbs" / "00_core.ipynb"],
            mathjax=tmp_path / "none.js",
        )


def test_docstring_math_becomes_math_role():
    spec = importlib.util.spec_from_file_location(
        "docs_conf", ROOT / "docs" / "conf.py"
    )
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    lines = [
        "The $N \\times N$ grid: $F_X$ (bs, N, A).",
        "Data under $SAT_TUTORIAL_DATA/mnist, $5 or $6.",
    ]
    conf._docstring_math(None, "function", "f", None, {}, lines)
    assert lines == [
        r"The :math:`N \times N` grid: :math:`F_X` (bs, N, A).",
        "Data under $SAT_TUTORIAL_DATA/mnist, $5 or $6.",
    ]  # not math: left alone


def _stamped(code, output, current):
    "A notebook storing `output` for `code`, stamped as tools/notebooks.py does."
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    import notebooks as nbt

    cell = new_code_cell(code)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=output)]
    nb = new_notebook(
        cells=[new_markdown_cell("# Stored"), cell],
        metadata={
            "kernelspec": {
                "name": "python3",
                "display_name": "python3",
                "language": "python",
            }
        },
    )
    h = nbt.code_hash(nb)
    nb.metadata[nbt.KEY] = {
        "code_hash": h if current else "0" * 16,
        "outputs": nbt.n_outputs(nb),  # the stamp counts the stored outputs too
    }
    return nb


def test_book_shows_current_stored_outputs_without_running(tmp_path):
    (tmp_path / "nbs").mkdir()
    # current: shown as stored; running it would fail the build
    nbformat.write(
        _stamped("raise RuntimeError('not to be run')", "STORED 7\n", True),
        tmp_path / "nbs" / "00_gamma.ipynb",
    )
    # stale: its stored output is not shown, it is executed
    nbformat.write(
        _stamped("print('NEW ' + 'OUTPUT')", "OLD OUTPUT\n", False),
        tmp_path / "nbs" / "01_delta.ipynb",
    )
    (tmp_path / "tex-svg-full.js").write_text("")
    (tmp_path / "RESULTS.md").write_text("# Results\n")
    _build(tmp_path, tmp_path / "work")
    gamma = (tmp_path / "site" / "nbs" / "00_gamma.html").read_text()
    delta = (tmp_path / "site" / "nbs" / "01_delta.html").read_text()
    assert "STORED 7" in gamma and "Traceback" not in gamma
    assert "NEW OUTPUT" in delta and "OLD OUTPUT" not in delta
