"""Reading measures of the notebooks: reading time (prose words / 150 + non-space code characters / 400, in minutes, so
that joining lines cannot lower it: about 10 lines a minute at 40 characters a line), the largest code cell in lines
(the notebooks are kept `ruff format`ted, so these are formatted lines), figure cells and exercises. The limits (DESIGN.md, "Notebook rules"): at most 60 minutes, no code cell over 80
lines; each paper notebook has at least three figures and 3–6 exercises.

    python tools/notebook_measures.py            # a table of every notebook
    python tools/notebook_measures.py --json     # the same as JSON
"""

import argparse, json, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_MINUTES, MAX_CELL_LINES = 60, 80
FIGURE = re.compile(
    r"plt\.|\.imshow\(|\bshow_\w+\(|\bdraw_\w+\(|subplots\(|savefig\(|\bplot\w*\("
)
EXERCISES = re.compile(r"^#+\s*exercises?\b", re.I | re.M)


def measures(path) -> dict:
    "The measures of one notebook."
    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    prose = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    lines = [c.count("\n") + 1 for c in code]
    words = sum(len(m.split()) for m in prose)
    chars = sum(len("".join(c.split())) for c in code)  # non-space characters
    exercises = 0
    for m in prose:  # numbered items after an "Exercises" heading
        hit = EXERCISES.search(m)
        if hit:
            exercises += len(re.findall(r"^\d+\.\s", m[hit.end() :], re.M))
    return {
        "notebook": Path(path).name,
        "minutes": round(words / 150 + chars / 400, 1),
        "largest_cell": max(lines or [0]),
        "figures": sum(
            1
            for c in code
            if not c.lstrip().startswith("#| export") and FIGURE.search(c)
        ),
        "exercises": exercises,
    }


def all_measures(nbs=ROOT / "nbs") -> list[dict]:
    return [measures(p) for p in sorted(Path(nbs).glob("[0-9]*.ipynb"))]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    a = p.parse_args(argv)
    rows = all_measures()
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(
        f"{'notebook':32} {'read (min)':>10} {'largest cell':>12} {'figures':>7} {'exercises':>9}"
    )
    for r in rows:
        flags = [
            f
            for f, bad in (
                ("over 60 min", r["minutes"] > MAX_MINUTES),
                ("cell over 80 lines", r["largest_cell"] > MAX_CELL_LINES),
            )
            if bad
        ]
        print(
            f"{r['notebook']:32} {r['minutes']:>10} {r['largest_cell']:>12} {r['figures']:>7} {r['exercises']:>9}  {', '.join(flags)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
