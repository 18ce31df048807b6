"""Which notebook needs which: the graph of the notebooks' imports, drawn into
docs/figures/notebook_dependencies.png (README.md and the book's first page show it).

A notebook needs an earlier one when one of its code cells imports, at the top level of
the cell, the module the earlier one exports (`from sat_tutorial.soft_attention import
...`, `from sat_tutorial import ocr`). Imports inside functions, and imports of later
notebooks' modules in a check, are not reading prerequisites and are left out. Edges
implied by others are left out too (A → C is not drawn when A → B → C is), so each arrow
says what a reader must have read before.

    python tools/notebook_graph.py            # writes the figure, prints the edges
"""

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "figures" / "notebook_dependencies.png"
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


def draw(g: dict[str, set[str]], path: Path = OUT) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    depth = {}

    def d(a):
        if a not in depth:
            depth[a] = 1 + max((d(b) for b in g[a]), default=-1)
        return depth[a]

    for a in g:
        d(a)
    layers = {}
    for a in sorted(g):
        layers.setdefault(depth[a], []).append(a)
    pos = {}
    for k, names in layers.items():
        for i, a in enumerate(names):
            pos[a] = (1.9 * (i - (len(names) - 1) / 2), -k)
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


def main() -> int:
    g = reduce(needs())
    for a in sorted(g):
        print(f"{a:28} needs {', '.join(sorted(g[a])) or '-'}")
    draw(g)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
