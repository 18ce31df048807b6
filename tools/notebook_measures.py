"""Reading measures of the notebooks, and the limits of DESIGN.md ("Notebook rules").

- Reading time, in minutes: prose words / 150 + non-space code characters / 400, so that
  joining lines cannot lower it (about 10 lines a minute at 40 characters a line).
  At most 60 minutes.
- The largest code cell, in lines as the book shows them: the notebooks are kept
  `ruff format`ted at 88 columns, and a line longer than that (a long string or
  comment) counts as the 88-column lines it fills, so a 233-character docstring is
  three lines. No code cell over 80 lines.
- Figures: the images the executed notebook stores in its outputs (tools/notebooks.py
  stores them), so a figure is what a reader sees, not a call that looks like plotting.
  None for a notebook without stored outputs. A paper notebook has at least three.
- Exercises: numbered items after an "Exercises" heading; a paper notebook has 3 to 6.

    python tools/notebook_measures.py            # a table of every notebook
    python tools/notebook_measures.py --json     # the same as JSON
    python tools/notebook_measures.py --markdown # the table README.md shows
"""

import argparse
import json
import math
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from notebooks import has_outputs, images  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MAX_MINUTES, MAX_CELL_LINES, WIDTH = 60, 80, 88
PAPERS = (  # the paper notebooks: at least three figures, 3 to 6 exercises
    "03_ram",
    "04_draw",
    "06_soft_attention",
    "07_hard_attention",
    "10_adaptive_attention",
    "11_butd",
    "14_attention_ocr",
    "15_transformer",
)
EXERCISES = re.compile(r"^#+\s*exercises?\b", re.I | re.M)


def cell_lines(code: str) -> int:
    "Lines of a code cell as an 88-column page shows them."
    return sum(max(1, math.ceil(len(line) / WIDTH)) for line in code.split("\n"))


def measures(path) -> dict:
    "The measures of one notebook."
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    cells = nb["cells"]
    prose = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
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
        "largest_cell": max([cell_lines(c) for c in code] or [0]),
        "figures": images(nb) if has_outputs(nb) else None,
        "exercises": exercises,
    }


def all_measures(nbs=ROOT / "nbs") -> list[dict]:
    return [measures(p) for p in sorted(Path(nbs).glob("[0-9]*.ipynb"))]


def flags(r: dict) -> list[str]:
    return [
        f
        for f, bad in (
            ("over 60 min", r["minutes"] > MAX_MINUTES),
            ("cell over 80 lines", r["largest_cell"] > MAX_CELL_LINES),
        )
        if bad
    ]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--markdown", action="store_true", help="a Markdown table")
    a = p.parse_args(argv)
    rows = all_measures()
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    if a.markdown:
        print(
            "| notebook | reading (min) | largest cell (lines) | figures | exercises |"
        )
        print("|---|---:|---:|---:|---:|")
        for r in rows:
            fig = "–" if r["figures"] is None else r["figures"]
            print(
                f"| {r['notebook'][: -len('.ipynb')]} | {r['minutes']} "
                f"| {r['largest_cell']} | {fig} | {r['exercises']} |"
            )
        return 0
    head = ("notebook", "read (min)", "largest cell", "figures", "exercises")
    print(f"{head[0]:32} {head[1]:>10} {head[2]:>12} {head[3]:>7} {head[4]:>9}")
    for r in rows:
        fig = "-" if r["figures"] is None else r["figures"]
        print(
            f"{r['notebook']:32} {r['minutes']:>10} {r['largest_cell']:>12} "
            f"{fig:>7} {r['exercises']:>9}  {', '.join(flags(r))}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
