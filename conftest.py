"""Point tests and notebooks at the shared offline data when it sits beside the
checkout."""

import os
from pathlib import Path

_shared = Path(__file__).resolve().parent.parent / "shared" / "data"
if "SAT_TUTORIAL_DATA" not in os.environ and _shared.is_dir():
    os.environ["SAT_TUTORIAL_DATA"] = str(_shared)
os.environ.setdefault("MPLBACKEND", "Agg")
