"""The package's layers (README "Layers"): the import-linter contracts in .importlinter
hold for the package, and each kind of break is reported: a copy of the package with
one import added breaks the contract that forbids it."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(cwd: Path, env_path: Path | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(env_path or "")}
    return subprocess.run(
        [str(LINT), "--no-cache"], cwd=cwd, capture_output=True, text=True, env=env
    )


def test_the_package_keeps_its_layers():
    r = lint(ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


BREAKS = {  # module that gains an import → the contract that forbids it
    ("ram", "fit"): "RAM and DRAW reach only core",
    (
        "learner",
        "ram",
    ): "Core, the Learner, its settings, the run format and the run folder",
    ("ocr_training", "optimization"): "The OCR reader shares the attention decoder",
    ("soft_attention", "training"): "A family's model does not import its training",
    ("training", "api"): "No family imports the command line",
    ("core", "runs"): "core at the bottom",
}


@pytest.mark.parametrize("module,imports", list(BREAKS))
def test_each_contract_reports_a_break(tmp_path, module, imports):
    pkg = tmp_path / "sat_copy"
    shutil.copytree(
        ROOT / "sat_tutorial", pkg, ignore=shutil.ignore_patterns("zoo", "__pycache__")
    )
    with open(pkg / f"{module}.py", "a", encoding="utf-8") as f:
        f.write(f"\nfrom . import {imports}  # the break under test\n")
    config = (ROOT / ".importlinter").read_text(encoding="utf-8")
    (tmp_path / ".importlinter").write_text(config.replace("sat_tutorial", "sat_copy"))
    r = lint(tmp_path, tmp_path)
    assert r.returncode == 1, r.stdout[-2000:]
    text = " ".join(r.stdout.split())  # contract names wrap at any word
    broken = [line for line in text.split("KEPT") if "BROKEN" in line]
    assert any(BREAKS[module, imports] in b for b in broken), r.stdout[-3000:]
    assert f"sat_copy.{module} -> sat_copy.{imports}" in r.stdout
