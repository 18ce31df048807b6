"""Which notebook needs which: the graph of the notebooks' imports, drawn into
docs/figures/notebook_dependencies.png (README.md and the book's first page show it).

A notebook needs an earlier one when one of its code cells imports, at the top level of
the cell, the module the earlier one exports (`from sat_tutorial.soft_attention import
...`, `from sat_tutorial import ocr`). Imports inside functions, and imports of later
notebooks' modules in a check, are not reading prerequisites and are left out. Edges
implied by others are left out too (A → C is not drawn when A → B → C is), so each arrow
says what a reader must have read before.

The edges are also written as text beside the figure (notebook_dependencies.txt), so a
test can tell when the notebooks' imports changed and the figure was not redrawn.

    python tools/notebook_graph.py            # writes the figure and the edges
    python tools/notebook_graph.py --check    # exit 1 if the stored edges are stale
    python tools/notebook_graph.py --prerequisites  # minutes to read before each paper

A paper notebook's prerequisites are every notebook it needs, transitively; their reading
minutes (tools/notebook_measures.py) add up to what README's "Start here" states.
"""

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from notebook_measures import PAPERS, measures  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "figures" / "notebook_dependencies.png"
EDGES = OUT.with_suffix(".txt")
EXP = re.compile(r"^#\|\s*default_exp\s+(\w+)", re.M)
IMP = re.compile(
    r"^from\s+sat_tutorial\.(\w+)\s+import|from\s+sat_tutorial\s+import\s+\(?([\w\s,]+)\)?"
    r"|^import\s+sat_tutorial\.(\w+)",
    re.M,
)


def needs(nbs=ROOT / "nbs") -> dict[str, set[str]]:
    "notebook stem → the stems of the notebooks whose modules it imports."
    paths = sorted(Path(nbs).glob("[0-9]*.ipynb"))
    code = {
        p.stem: "\n".join(
            "".join(c["source"])
            for c in json.loads(p.read_text(encoding="utf-8"))["cells"]
            if c["cell_type"] == "code"
        )
        for p in paths
    }
    owner = {m: s for s, c in code.items() for m in EXP.findall(c)}
    uses = {}
    for s, c in code.items():
        mods = set()
        for a, b, d in IMP.findall(c):
            mods |= {a, d} | {x.strip() for x in b.replace("\n", ",").split(",")}
        uses[s] = {owner[m] for m in mods if m in owner and owner[m] != s}
    order = list(code)
    out = {s: {u for u in uses[s] if order.index(u) < order.index(s)} for s in code}
    for s in code:  # a later notebook's module (14 uses 14b's word images), unless
        for u in uses[s] - out[s]:  # that notebook needs this one (a check's use)
            if s not in _reach(out, u):
                out[s].add(u)
    return out


def _reach(g: dict[str, set[str]], a: str) -> set[str]:
    "Every notebook `a` needs, directly or through others."
    seen, todo = set(), [a]
    while todo:
        for b in g[todo.pop()] - seen:
            seen.add(b)
            todo.append(b)
    return seen


def reduce(g: dict[str, set[str]]) -> dict[str, set[str]]:
    "The transitive reduction: drop A → C where A reaches C through another need."
    return {
        a: {c for c in g[a] if not any(c in _reach(g, b) for b in g[a] - {c})}
        for a in g
    }


def layout(g: dict[str, set[str]], sweeps: int = 4) -> dict[str, tuple[float, int]]:
    """(x, y) of each notebook: y = minus its depth (the longest chain of needs above
    it); a notebook that needs nothing sits just above the first one that needs it. In
    each layer the notebooks are ordered by the mean x of their needs, then of the
    notebooks that need them (a few sweeps of the barycentre heuristic), so that
    arrows cross less."""
    depth = {}

    def d(a):
        if a not in depth:
            depth[a] = 1 + max((d(b) for b in g[a]), default=-1)
        return depth[a]

    for a in g:
        d(a)
    users = {a: {b for b in g if a in g[b]} for a in g}
    for a in g:  # a source moves down to just above its first user
        if not g[a] and users[a]:
            depth[a] = max(depth[a], min(depth[u] for u in users[a]) - 1)
    layers = {}
    for a in sorted(g):
        layers.setdefault(depth[a], []).append(a)
    x = {a: float(i) for names in layers.values() for i, a in enumerate(names)}

    def place(names, key):
        names.sort(key=lambda a: (key(a), a))
        for i, a in enumerate(names):
            x[a] = i - (len(names) - 1) / 2

    def mean_x(nodes, a):
        return sum(x[b] for b in nodes) / len(nodes) if nodes else x[a]

    for _ in range(sweeps):
        for k in sorted(layers):
            place(layers[k], lambda a: mean_x(g[a], a))
        for k in sorted(layers, reverse=True):
            place(layers[k], lambda a: mean_x(users[a], a))
    for k in sorted(layers):
        place(layers[k], lambda a: mean_x(g[a], a))
    return {a: (1.9 * x[a], -depth[a]) for a in g}


def draw(g: dict[str, set[str]], path: Path = OUT) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pos = layout(g)
    layers = {}
    for a, (_, y) in pos.items():
        layers.setdefault(y, []).append(a)
    wide = max(map(len, layers.values()))
    fig, ax = plt.subplots(figsize=(1.9 * wide + 0.6, 0.72 * len(layers) + 0.6))
    for a, bs in g.items():
        for b in bs:
            ax.annotate(
                "",
                xy=pos[a],
                xytext=pos[b],
                arrowprops=dict(
                    arrowstyle="->",
                    color="0.55",
                    lw=0.8,
                    shrinkA=9,
                    shrinkB=9,
                    connectionstyle="arc3,rad=0.05",
                ),
            )
    paper = {"03", "04", "06", "07", "10", "11", "14", "15"}
    for a, (x, y) in pos.items():
        is_paper = a[:2] in paper and a[2] == "_"
        ax.text(
            x,
            y,
            a,
            ha="center",
            va="center",
            fontsize=7,
            bbox=dict(
                boxstyle="round,pad=0.3",
                lw=0.6,
                fc="#fde9c9" if is_paper else "#e8eef7",
                ec="#c07a12" if is_paper else "#4a6fa5",
            ),
        )
    xs = [x for x, _ in pos.values()]
    ax.set_xlim(min(xs) - 1.0, max(xs) + 1.0)
    ax.set_ylim(-len(layers) + 0.5, 0.5)
    ax.axis("off")
    ax.set_title(
        "Which notebook needs which (an arrow: read the first before the second; "
        "orange: a paper)",
        fontsize=8,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def edges_text(g: dict[str, set[str]]) -> str:
    "One line per notebook: the notebooks it needs (after the transitive reduction)."
    return "".join(
        f"{a:30} needs {', '.join(sorted(g[a])) or '-'}\n" for a in sorted(g)
    )


def prerequisites(stem: str, g: dict[str, set[str]] | None = None) -> dict[str, float]:
    "The notebooks `stem` needs, transitively, each with its minutes to read."
    g = needs() if g is None else g
    return {
        s: measures(ROOT / "nbs" / f"{s}.ipynb")["minutes"]
        for s in sorted(_reach(g, stem))
    }


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--prerequisites" in argv:
        full = needs()
        for paper in PAPERS:
            pre = prerequisites(paper, full)
            print(f"{paper:24} {sum(pre.values()):6.1f} min over {len(pre)} notebooks")
        return 0
    g = reduce(needs())
    text = edges_text(g)
    if "--check" in argv:
        old = EDGES.read_text(encoding="utf-8") if EDGES.is_file() else ""
        if old != text:
            print(
                f"{EDGES.relative_to(ROOT)} is stale: the notebooks' imports changed; "
                "run python tools/notebook_graph.py"
            )
            return 1
        return 0
    print(text, end="")
    draw(g)
    EDGES.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)} and {EDGES.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
