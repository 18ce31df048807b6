"""Committed notebooks carry their executed outputs (tools/notebooks.py), stamped with a
hash of their code cells: a notebook whose stored outputs were not produced by its
current code fails here, with the command that executes it again. Each notebook stays
under about 1 MB."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import notebooks as nbt  # noqa: E402

PATHS = {p.stem: p for p in nbt.notebooks()}


@pytest.mark.parametrize("name", sorted(PATHS))
def test_stored_outputs_are_current(name):
    state = nbt.status(PATHS[name])
    assert state == "current", (
        f"nbs/{name}.ipynb: its stored outputs were not produced by its current code "
        f"({state}): run `{nbt.COMMAND.format(name=name)}` and commit the notebook"
    )


@pytest.mark.parametrize("name", sorted(PATHS))
def test_notebook_under_1_mb(name):
    size = PATHS[name].stat().st_size
    assert size <= nbt.MAX_BYTES, (
        f"nbs/{name}.ipynb is {size / 1e6:.2f} MB (at most {nbt.MAX_BYTES / 1e6:.0f}): "
        "make its figures smaller (figsize, fewer panels)"
    )


def _nb(cells, stamp=None, outputs=1):
    nb = {"cells": cells, "metadata": {}}
    if stamp is not None:
        nb["metadata"][nbt.KEY] = {"code_hash": stamp, "outputs": outputs}
    return nb


def test_status_tells_current_from_stale(tmp_path):
    out = [{"output_type": "stream", "name": "stdout", "text": "1\n"}]
    cell = {"cell_type": "code", "source": "print(1)", "outputs": out, "metadata": {}}
    note = {"cell_type": "markdown", "source": "a", "metadata": {}}
    h = nbt.code_hash(_nb([cell]))
    p = tmp_path / "x.ipynb"

    def state(nb):
        p.write_text(json.dumps(nb))
        return nbt.status(p)

    assert state(_nb([cell, note], h)) == "current"
    assert nbt.code_hash(_nb([cell, note])) == h  # prose does not enter the hash
    edited = dict(cell, source="print(2)")
    assert state(_nb([edited, note], h)) == "stale"  # code changed after the run
    assert state(_nb([cell])) == "stale"  # outputs that no run stamped
    assert state(_nb([dict(cell, outputs=[])], h)) == "stale"  # outputs cleared
    assert state(_nb([dict(cell, outputs=[])])) == "unexecuted"
    quiet = dict(cell, source="x = 1", outputs=[])  # a notebook that prints nothing
    assert state(_nb([quiet], nbt.code_hash(_nb([quiet])), outputs=0)) == "current"


def test_nbdev_clean_keeps_outputs_and_stamp():
    "settings.ini must let nbdev_clean keep what tools/notebooks.py stores."
    from configparser import ConfigParser

    cfg = ConfigParser()
    cfg.read(nbt.ROOT / "settings.ini")
    d = cfg["DEFAULT"]
    assert d.get("clear_all") == "False", "clear_all = True would strip every output"
    assert nbt.KEY in d.get("allowed_metadata_keys", "").split(), (
        f"nbdev_clean would strip the stamp: add {nbt.KEY} to allowed_metadata_keys"
    )


def test_outputs_on_the_standin_digits_are_refused():
    "`make notebooks` never stores figures of RAM or DRAW drawn on the stand-in digits."
    said = {"output_type": "stream", "name": "stderr", "text": "sat_tutorial: using "}
    said["text"] += "stand-in digits rendered from matplotlib's fonts\n"
    cell = {"cell_type": "code", "source": "x", "outputs": [said], "metadata": {}}
    assert nbt.on_standin(_nb([cell]))
    assert not nbt.on_standin(_nb([dict(cell, outputs=[])]))
    assert "01d_mnist_checks" in nbt.TEACHES_STANDIN and len(nbt.TEACHES_STANDIN) == 1
    for name, path in PATHS.items():  # and none of the stored notebooks is
        if name not in nbt.TEACHES_STANDIN:
            assert not nbt.on_standin(json.loads(path.read_text())), name


def test_an_edit_made_while_a_notebook_runs_is_kept(tmp_path, monkeypatch):
    """A notebook edited on disk while `make notebooks` executes it keeps the edit: its
    outputs are not written over it (they were, and an edit was lost)."""
    import nbclient

    path = tmp_path / "t.ipynb"
    cell = {"cell_type": "code", "id": "c1", "source": "1 + 1", "metadata": {}}
    nb = _nb([dict(cell, outputs=[], execution_count=None)])
    path.write_text(json.dumps(nb))

    def edit_while_running(self, *a, **k):
        edited = json.loads(path.read_text())
        edited["cells"][0]["source"] = "2 + 2"
        path.write_text(json.dumps(edited))
        return self.nb

    monkeypatch.setattr(nbclient.NotebookClient, "execute", edit_while_running)
    with pytest.raises(RuntimeError, match="changed on disk while it ran"):
        nbt.execute(path)
    assert json.loads(path.read_text())["cells"][0]["source"] == "2 + 2"
