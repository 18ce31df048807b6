"""Sphinx configuration of the book. docs/build.py copies this file into the staging
folder and runs sphinx-build there.

Everything the built site loads is on disk: the theme's own CSS, JS and fonts, and
MathJax 3 copied into _static.
"""

import os
import re
import sys
from pathlib import Path

ROOT = Path(os.environ.get("SAT_DOCS_ROOT", Path(__file__).resolve().parents[2]))
WORK = Path(os.environ.get("SAT_DOCS_WORK", ROOT / ".docs_build"))
sys.path.insert(0, str(ROOT))  # autodoc documents this checkout's sat_tutorial

project = "sat_tutorial"
author = "sat_tutorial authors"
copyright = "2026 onwards, sat_tutorial authors"
html_title = "sat_tutorial: visual attention, derived in notebooks"

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.mathjax"]
exclude_patterns = ["**.ipynb_checkpoints"]
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
myst_dmath_double_inline = (
    True  # `$$...$$` inside a paragraph is display math, as Jupyter renders it
)

# Notebooks: executed once, outputs kept in jupyter-cache (keyed by the code cells), so
# a rebuild
# after one notebook changes executes only that one.
nb_execution_mode = "cache"
nb_execution_cache_path = str(WORK / "cache")
nb_execution_timeout = int(os.environ.get("SAT_DOCS_CELL_TIMEOUT", "900"))
nb_execution_raise_on_error = (
    True  # a notebook that fails is a failed build, not a page without figures
)
nb_execution_show_tb = True
nb_merge_streams = True
nb_ipywidgets_js = {}  # the default loads require.js and the widget manager from CDNs

autodoc_default_options = {
    "members": True,
    "undoc-members": True,
    "show-inheritance": True,
}
autodoc_member_order = "bysource"
add_module_names = False
default_role = (
    "literal"  # docstrings write `name` for code, as the notebooks' Markdown does
)

# Math offline: MathJax 3 from npm, copied by docs/build.py to _static/mathjax/ (path
# relative to _static).
mathjax_path = "mathjax/tex-svg-full.js"

html_theme = "sphinx_book_theme"
html_context = {
    "default_mode": "light"
}  # else the theme logs "invalid theme mode" on a first visit
html_static_path = ["_static"]
html_theme_options = {
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "navigation_with_keys": False,
}
html_last_updated_fmt = None
html_copy_source = (
    False  # search needs only searchindex.js; no per-page source fetches on file://
)
html_show_sourcelink = False
html_show_search_summary = (
    False  # summaries fetch each page, which browsers refuse on file://
)


def _keep_outputs_under_work(app):
    """myst-nb writes executed outputs to <outdir>/../jupyter_execute, i.e. beside
    _docs/ in the checkout: keep them in the build folder instead."""
    out = WORK / "jupyter_execute"
    app.env.mystnb_config = app.env.mystnb_config.copy(output_folder=str(out))


# Docstrings write math as the notebooks do, `$\alpha_t$`; autodoc reads them as
# reStructuredText, which has no `$`.
# A formula may run over two lines of a docstring (`$(g_X, g_Y, \sigma^2,` / `\delta)$`):
# it is matched across one line break (never a blank line) and joined onto one line, or
# reStructuredText would read its backslashes as escapes.
_INLINE_MATH = re.compile(
    r"(?<![\\$\w])\$(?![\s$])((?:[^$\n]|\n(?![ \t]*\n))*?[^\s\\$])\$(?![\w$])"
)


def _docstring_math(app, what, name, obj, options, lines):
    text = "\n".join(lines)
    text = _INLINE_MATH.sub(lambda m: ":math:`" + " ".join(m[1].split()) + "`", text)
    lines[:] = text.split("\n")


def setup(app):
    app.connect(
        "builder-inited", _keep_outputs_under_work, priority=900
    )  # after myst-nb's own handler (500)
    app.connect("autodoc-process-docstring", _docstring_math)
