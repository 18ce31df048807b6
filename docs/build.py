"""Build the book: every notebook in nbs/ with its outputs, an API page per module, the
command-line options and the measured results, as a static HTML site in _docs/ that
loads nothing from the network. A notebook whose stored outputs are current
(tools/notebooks.py stamped them from its present code) is shown with those outputs
and not executed; any other is executed, its outputs cached by jupyter-cache.

    python docs/build.py [--out _docs] [--work .docs_build] [--jobs 1]

The notebooks on disk are never changed: they are copied into <work>/src, where nbdev's
directives become myst-nb cell tags (`#| hide` removes the cell, `#| eval: false` skips
its execution) and the `#|` lines are stripped from the shown source. Staged files are
rewritten only when their content changes, so Sphinx rereads only what changed, and
jupyter-cache executes only notebooks whose code changed.
"""

from __future__ import annotations

import argparse
import html.parser
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MATHJAX_NPM = "mathjax@3"
MATHJAX_REL = Path(
    "npm/node_modules/mathjax/es5/tex-svg-full.js"
)  # under the work folder (make docs installs it)

DIRECTIVE = re.compile(r"^\s*#\|\s*(?P<key>[\w-]+)\s*:?\s*(?P<value>.*?)\s*$")
NBVAL = re.compile(r"^\s*#\s*NBVAL_\w+\s*$")
REMOVE = {"hide", "include: false"}  # the whole cell
SKIP_RUN = {"eval: false", "notest", "slow"}  # not executed (as in nbs/conftest.py)
TAGS = {"echo: false": "remove-input", "output: false": "remove-output"}


class BuildError(Exception):
    """An expected failure, reported as one line."""


def directives(source: str) -> list[str]:
    """nbdev's `#|` directives in a cell, normalised: 'export', 'eval: false',
    'default_exp core', ..."""
    out = []
    for line in source.splitlines():
        if DIRECTIVE.match(line):
            d = re.sub(r"\s*:\s*", ": ", line.split("|", 1)[1].strip(), count=1)
            out.append(d if d.startswith("default_exp") else d.lower())
    return out


def strip_markers(source: str) -> str:
    "The source a reader sees: without `#|` directive lines and `# NBVAL_...` markers."
    lines = [
        ln
        for ln in source.splitlines()
        if not DIRECTIVE.match(ln) and not NBVAL.match(ln)
    ]
    return "\n".join(lines).strip("\n")


def stage_notebook(nb, api_link: bool = True, stored: bool = False):
    """Turn nbdev directives of a notebook (nbformat node, changed in place) into
    myst-nb tags; return its module name.

    With `api_link`, a link to the API page of the module it exports (api/<module>)
    follows its first markdown cell. With `stored`, its stored outputs are kept and
    myst-nb does not execute it."""
    module = None
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        found = directives(cell.source)
        for d in found:
            if d.startswith("default_exp "):
                module = d.split(None, 1)[1]
        tags = list(cell.metadata.get("tags", []))
        shown = strip_markers(cell.source)
        if any(d in REMOVE for d in found) or not shown.strip():
            tags.append("remove-cell")
        if any(d in SKIP_RUN for d in found):
            tags.append("skip-execution")
        tags += [TAGS[d] for d in found if d in TAGS]
        if tags:
            cell.metadata["tags"] = sorted(set(tags))
        cell.source = shown
        if not stored:
            cell.outputs, cell.execution_count = [], None
    if stored:
        nb.metadata["mystnb"] = {"execution_mode": "off"}
    if module and api_link:
        import nbformat

        link = nbformat.v4.new_markdown_cell(
            f"```{{seealso}}\nThe API of `sat_tutorial.{module}`, "
            f"the module this notebook exports: {{doc}}`../api/{module}`.\n```"
        )
        link.id = "sat-docs-api-link"
        first_md = next(
            (i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"), -1
        )
        nb.cells.insert(first_md + 1, link)
    return module


def options_page() -> str:
    """Every `sat-tutorial` subcommand's --help, generated from the parser the command
    itself uses."""
    from sat_tutorial.cli import build_parser

    def walk(parser, name):
        yield name, parser.format_help()
        for action in parser._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                for sub, p in action.choices.items():
                    yield from walk(p, f"{name} {sub}")

    notes = (
        DOCS / "options.md"
    ).read_text()  # the presets and what each option did, written by hand
    parts = [
        notes,
        "## Every subcommand's `--help`\n",
        "Every subcommand of `sat-tutorial` (also `python -m sat_tutorial`) with its "
        "options, exactly as its `--help` prints them; this part is generated from the "
        "command's own parser when the book is built.\n",
    ]
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = (
        "110"  # argparse wraps at the terminal width: the same page on every machine
    )
    try:
        for name, text in walk(build_parser(), "sat-tutorial"):
            parts.append(f"### `{name}`\n\n```text\n{text.rstrip()}\n```\n")
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns
    return "\n".join(parts)


def write_if_changed(path: Path, text: str | bytes) -> bool:
    data = text.encode() if isinstance(text, str) else text
    if path.exists() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return True


def stage(nbs: list[Path], src: Path, mathjax: Path, results: list[Path]) -> list[str]:
    """Write the Sphinx source folder; return the staged notebooks' docnames in reading
    order."""
    import nbformat

    expected: set[Path] = set()

    def put(rel: str, text):
        expected.add(src / rel)
        write_if_changed(src / rel, text)

    put("conf.py", (DOCS / "conf.py").read_text())
    put("_static/mathjax/tex-svg-full.js", mathjax.read_bytes())
    for fig in sorted((DOCS / "figures").glob("*.png")):  # the first page shows them
        put(f"figures/{fig.name}", fig.read_bytes())

    sys.path.insert(0, str(ROOT / "tools"))
    from notebooks import status

    nb_docs, api_docs = [], []
    for path in nbs:
        nb = nbformat.read(path, as_version=4)
        module = stage_notebook(nb, stored=status(path) == "current")
        put(f"nbs/{path.name}", nbformat.writes(nb) + "\n")
        nb_docs.append(f"nbs/{path.stem}")
        if module:
            head = f"`sat_tutorial.{module}`"
            put(
                f"api/{module}.md",
                f"# {head}\n\nGenerated from the docstrings; derived and explained in "
                f"the notebook {{doc}}`../nbs/{path.stem}`.\n\n```{{eval-rst}}\n"
                f".. automodule:: sat_tutorial.{module}\n```\n",
            )
            api_docs.append(f"api/{module}")

    result_docs = []
    for r in results:
        put(f"results/{r.name}", r.read_text())
        result_docs.append(f"results/{r.stem}")
    put("options.md", options_page())

    def toctree(caption, docs):
        return (
            f"\n```{{toctree}}\n:caption: {caption}\n:maxdepth: 1\n\n"
            + "\n".join(docs)
            + "\n```\n"
            if docs
            else ""
        )

    index = (DOCS / "index.md").read_text()
    index += toctree("Notebooks, in reading order", nb_docs)
    index += toctree("Reference", ["options"] + api_docs)
    index += toctree("Measured results", result_docs)
    put("index.md", index)

    for f in src.rglob("*"):  # staged pages whose source is gone (a deleted notebook)
        if (
            f.is_file()
            and f not in expected
            and f.suffix in (".ipynb", ".md", ".rst", ".js", ".py")
        ):
            f.unlink()
    return nb_docs


class _Refs(html.parser.HTMLParser):
    """Collects the URLs a page would load: script src, link href, img src (and srcset),
    iframe/source/video src."""

    LOADS = {
        "script": ("src",),
        "link": ("href",),
        "img": ("src", "srcset"),
        "iframe": ("src",),
        "source": ("src", "srcset"),
        "video": ("src", "poster"),
        "audio": ("src",),
        "embed": ("src",),
    }

    def __init__(self):
        super().__init__()
        self.urls, self.styles, self._in_style = [], [], False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for name in self.LOADS.get(tag, ()):
            if a.get(name):
                self.urls.append((tag, a[name]))
        if a.get("style"):
            self.styles.append(a["style"])
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.styles.append(data)


REMOTE = re.compile(r"^\s*(https?:)?//", re.I)
CSS_REMOTE = re.compile(r"""(url\(\s*['"]?|@import\s+['"])\s*(https?:)?//""", re.I)


def external_refs(site: Path) -> list[str]:
    """Every reference in the built site that would make a browser fetch something from
    the network."""
    bad = []
    for page in sorted(site.rglob("*.html")):
        p = _Refs()
        p.feed(page.read_text(errors="replace"))
        for tag, url in p.urls:
            if any(REMOTE.match(u.strip().split(" ")[0]) for u in url.split(",")):
                bad.append(f"{page.relative_to(site)}: <{tag}> {url}")
        bad += [
            f"{page.relative_to(site)}: style loads {s.strip()[:80]}"
            for s in p.styles
            if CSS_REMOTE.search(s)
        ]
    for css in sorted(site.rglob("*.css")):
        for m in CSS_REMOTE.finditer(css.read_text(errors="replace")):
            bad.append(f"{css.relative_to(site)}: {m.group(0)}")
    return bad


def build(
    out: Path,
    work: Path,
    nbs: list[Path] | None = None,
    mathjax: Path | None = None,
    results: list[Path] | None = None,
    jobs: int = 1,
    quiet: bool = False,
) -> list[str]:
    """Stage and build the site; return the notebook docnames. Raises BuildError with a
    one-line reason."""
    try:
        import myst_nb, sphinx, sphinx_book_theme  # noqa: F401
    except ImportError as e:
        raise BuildError(
            f"the docs toolchain is not installed ({e.name}): "
            "pip install -e '.[docs]' (make docs does it)"
        )
    out, work = out.resolve(), work.resolve()
    nbs = (
        sorted(p for p in (ROOT / "nbs").glob("*.ipynb") if not p.name.startswith("_"))
        if nbs is None
        else nbs
    )
    if not nbs:
        raise BuildError("no notebooks to build")
    mathjax = work / MATHJAX_REL if mathjax is None else mathjax
    if not mathjax.is_file():
        raise BuildError(
            f"MathJax not found at {mathjax}: run "
            f"`npm install --prefix {work / 'npm'} {MATHJAX_NPM}` (make docs does it)"
        )
    results = (
        sorted((ROOT / "bench").glob("RESULTS*.md")) if results is None else results
    )
    src = work / "src"
    docs = stage(nbs, src, mathjax, results)

    env = dict(os.environ)
    # Headless, and figures become outputs of their cells: the inline backend
    # (MPLBACKEND=Agg, as the tests use,
    # would draw them nowhere).
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    shared = (
        ROOT.parent / "shared" / "data"
    )  # the offline datasets beside the checkout, as the Makefile's DATA_ENV
    if "SAT_TUTORIAL_DATA" not in env and shared.is_dir():
        env["SAT_TUTORIAL_DATA"] = str(shared)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p]
    )  # kernels too
    env["SAT_DOCS_ROOT"], env["SAT_DOCS_WORK"] = str(ROOT), str(work)
    cmd = [
        sys.executable,
        "-m",
        "sphinx",
        "-b",
        "html",
        "-d",
        str(work / "doctrees"),
        "-j",
        str(jobs),
        str(src),
        str(out),
    ] + (["-q"] if quiet else [])
    r = subprocess.run(cmd, env=env, cwd=src)
    if r.returncode:
        raise BuildError(
            f"sphinx-build failed (exit {r.returncode}); see the messages above"
        )
    bad = external_refs(out)
    if bad:
        raise BuildError(
            f"the site would load {len(bad)} thing(s) from the network, first: {bad[0]}"
        )
    return docs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT / "_docs",
        help="the built site (default: _docs)",
    )
    ap.add_argument(
        "--work",
        type=Path,
        default=ROOT / ".docs_build",
        help="staging, execution cache and MathJax (default: .docs_build)",
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="parallel Sphinx readers (each runs a kernel)",
    )
    ap.add_argument(
        "--fresh",
        action="store_true",
        help="forget the execution cache and Sphinx's state first",
    )
    args = ap.parse_args(argv)
    if args.fresh:
        for d in ("cache", "doctrees", "src", "jupyter_execute"):
            shutil.rmtree(args.work / d, ignore_errors=True)
    t0 = time.perf_counter()
    try:
        docs = build(args.out, args.work, jobs=args.jobs)
    except BuildError as e:
        print(f"docs/build.py: {e}", file=sys.stderr)
        return 1
    print(
        f"docs/build.py: {len(docs)} notebooks built into {args.out}/index.html "
        f"in {time.perf_counter() - t0:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
