"""Every generated module imports on its own (a demo line left in an exported cell would
break this)."""

import importlib, subprocess, sys
from pathlib import Path

import pytest

MODULES = sorted(
    p.stem
    for p in (Path(__file__).resolve().parents[1] / "sat_tutorial").glob("*.py")
    if not p.stem.startswith("_")
)


@pytest.mark.parametrize("name", MODULES)
def test_module_imports_cleanly(name):
    r = subprocess.run(
        [sys.executable, "-c", f"import sat_tutorial.{name}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr


def test_command_help():
    r = subprocess.run(
        [sys.executable, "-m", "sat_tutorial", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "demo" in r.stdout and "train" in r.stdout
