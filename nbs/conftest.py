"""nbval ignores nbdev's directives; skip the cells that nbdev marks as not to be run in tests."""

import re
import pytest

collect_ignore_glob = ["_*.ipynb", ".ipynb_checkpoints/*"]
_SKIP = re.compile(r"^#\|\s*(eval:\s*false|notest|slow)\s*$", re.M)


def pytest_collection_modifyitems(config, items):
    for item in items:
        cell = getattr(item, "cell", None)
        if cell is not None and _SKIP.search(cell.get("source", "")):
            item.add_marker(
                pytest.mark.skip(reason="nbdev directive: not run in tests")
            )
