"""The Python API at the package's top level (notebook 13_api): `sat_tutorial.load_captioner` and its classes are loaded on
first use from `sat_tutorial.api`, and the console script named in settings.ini still finds the command's `main`."""

import configparser, importlib, subprocess, sys
from pathlib import Path

import pytest

import sat_tutorial

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["load_captioner", "ImageCaptioner", "CaptionResult"])
def test_top_level_names_come_from_the_api_module(name):
    from sat_tutorial import api

    assert getattr(sat_tutorial, name) is getattr(api, name) and name in dir(
        sat_tutorial
    )


def test_import_stays_light_until_first_use():
    code = (
        "import sys, sat_tutorial; assert 'sat_tutorial.api' not in sys.modules and 'torch' not in sys.modules; "
        "sat_tutorial.load_captioner; assert 'sat_tutorial.api' in sys.modules"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr


def test_unknown_top_level_name_is_an_attribute_error():
    with pytest.raises(
        AttributeError, match="no attribute 'load_checkpoint_captioner'"
    ):
        sat_tutorial.load_checkpoint_captioner


def test_console_script_finds_main():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "settings.ini")
    scripts = dict(
        line.split("=", 1) for line in cfg["DEFAULT"]["console_scripts"].split()
    )
    module, func = scripts["sat-tutorial"].split(":")
    from sat_tutorial.cli import main

    assert getattr(importlib.import_module(module), func) is main
