"""nbval ignores nbdev's directives; skip the cells that nbdev marks as not to be run in
tests.

The notebooks keep their executed outputs for readers (tools/notebooks.py), and
nbdev_clean sets execution counts to null; nbval would take such a cell for an unrun
reference with outputs ("Unrun reference cell has outputs"). The checks are the
notebooks' assertions (--nbval-lax), and tests/test_stored_outputs.py checks that the
outputs are current, so nbval runs each cell against no reference output unless the
cell asks for a comparison."""

import re
import pytest

collect_ignore_glob = ["_*.ipynb", ".ipynb_checkpoints/*"]
_SKIP = re.compile(r"^#\|\s*(eval:\s*false|notest|slow)\s*$", re.M)
_COMPARE = re.compile(r"^#\s*NBVAL_CHECK_OUTPUT\s*$", re.M)


def pytest_collection_modifyitems(config, items):
    for item in items:
        cell = getattr(item, "cell", None)
        if cell is None:
            continue
        if _SKIP.search(cell.get("source", "")):
            item.add_marker(
                pytest.mark.skip(reason="nbdev directive: not run in tests")
            )
        if not _COMPARE.search(cell.get("source", "")):
            cell["outputs"] = []
