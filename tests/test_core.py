import os, random, subprocess, sys, textwrap
import numpy as np
import pytest
import torch

from sat_tutorial.core import (
    check_shape,
    find_data,
    rng_state,
    seed_everything,
    set_rng_state,
)
from sat_tutorial.checkpoints import load_checkpoint, save_checkpoint
from sat_tutorial.flags import get_device


class _OnGPU:
    """Stands for a tensor that `load_checkpoint(map_location='cuda')` put on a GPU:
    usable only after `.cpu()`."""

    def __init__(self, t):
        self.t = t

    def cpu(self):
        return self.t

    def numpy(self):
        raise TypeError("can't convert cuda:0 device type tensor to numpy")


def test_rng_state_restores_from_states_mapped_to_a_gpu():
    """`fit` loads last.pt with map_location its device, so on a GPU the saved RNG
    states arrive there (resume failed on an H200 in stop 35)."""
    seed_everything(3)
    st = rng_state()
    want = (random.random(), float(np.random.rand()), float(torch.rand(())))
    kind, keys, pos, has_gauss, cached = st["numpy"]
    moved = {
        **st,
        "numpy": [kind, _OnGPU(keys), pos, has_gauss, cached],
        "torch": _OnGPU(st["torch"]),
    }
    seed_everything(4)
    set_rng_state(moved)
    assert (random.random(), float(np.random.rand()), float(torch.rand(()))) == want


def test_seed_and_rng_roundtrip_through_checkpoint(tmp_path):
    seed_everything(3)
    save_checkpoint({"rng": rng_state()}, tmp_path / "c.pt")
    a = (random.random(), np.random.rand(), torch.randn(2).tolist())
    set_rng_state(load_checkpoint(tmp_path / "c.pt")["rng"])
    assert a == (random.random(), np.random.rand(), torch.randn(2).tolist())


def test_check_shape_binds_names():
    dims = check_shape(torch.zeros(4, 196, 512), ("B", "L", "D"))
    assert dims == {"B": 4, "L": 196, "D": 512}
    with pytest.raises(ValueError, match="L=196 elsewhere"):
        check_shape(torch.zeros(4, 10), ("B", "L"), dims, name="alpha")


def test_device_errors_are_clear():
    assert get_device("cpu").type == "cpu"
    with pytest.raises((RuntimeError, ValueError)):
        get_device("cuda:99" if torch.cuda.is_available() else "cuda")


def test_missing_data_message(tmp_path, monkeypatch):
    monkeypatch.setenv("SAT_TUTORIAL_DATA", str(tmp_path))
    with pytest.raises(
        FileNotFoundError, match="flickr8k/dataset_flickr8k.json not found"
    ):
        find_data("flickr8k", "dataset_flickr8k.json")


def test_killed_checkpoint_write_keeps_previous(tmp_path):
    """A process killed with SIGKILL halfway through writing leaves the previous
    checkpoint loadable."""
    p = tmp_path / "ckpt.pt"
    save_checkpoint({"step": 1, "w": torch.zeros(10)}, p)
    code = textwrap.dedent(f"""
        import os, signal, torch
        from sat_tutorial import checkpoints
        real = torch.save
        def dying_save(obj, f):
            f.write(b"partial bytes of a checkpoint")
            f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        checkpoints.torch.save = dying_save
        checkpoints.save_checkpoint({{"step": 2}}, {str(p)!r})
    """)
    r = subprocess.run([sys.executable, "-c", code])
    assert r.returncode == -9
    assert load_checkpoint(p)["step"] == 1


def test_untrusted_pickle_refused(tmp_path):
    p = tmp_path / "evil.pt"
    torch.save({"f": os.system}, p)
    with pytest.raises(ValueError, match="evil.pt could not be loaded"):
        load_checkpoint(p)


def test_stale_temp_cleanup_spares_a_live_process(tmp_path):
    """A checkpoint write's temp file names its process: the next write removes the
    temp of a process that is gone, never one of a process that still runs (another
    run's write in progress)."""
    from sat_tutorial.checkpoints import TEMP_SUFFIX

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
    )
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead_tmp = tmp_path / f".last.pt.{int(gone.stdout)}-ab12{TEMP_SUFFIX}"
        live_tmp = tmp_path / f".last.pt.{live.pid}-cd34{TEMP_SUFFIX}"
        for p in (dead_tmp, live_tmp):
            p.write_bytes(b"half a checkpoint")
        with pytest.warns(UserWarning, match="interrupted checkpoint write"):
            save_checkpoint({"step": 1}, tmp_path / "last.pt")
        assert not dead_tmp.exists() and live_tmp.exists()
        names = sorted(p.name for p in tmp_path.iterdir())
        assert names == [live_tmp.name, "last.pt"]  # and its own temp is gone
    finally:
        live.kill()
        live.wait()


def test_range_takes_numpy_numbers_and_refuses_floats_as_integers():
    """Issue 59: an integer range refuses 2.0 (the API took beam_size=2.0 and failed
    deep in the beam search) and takes NumPy's integers (it refused np.int64(2));
    `check` returns the value as a Python number."""
    import numpy as np
    from sat_tutorial.core import InputError
    from sat_tutorial.ranges import positive_float, positive_int

    for bad in (2.0, np.float64(2.0), 2.5, True, "2", None):
        with pytest.raises(InputError, match="beam_size must be an integer ≥ 1"):
            positive_int.check(bad, "beam_size")
    for good in (np.int64(2), np.int32(2), np.uint8(2), 2):
        got = positive_int.check(good, "beam_size")
        assert got == 2 and type(got) is int
    for good in (np.float32(0.5), np.int64(3), 3, 0.5):
        assert type(positive_float.check(good, "lr")) is float
    with pytest.raises(InputError, match="lr must be a number > 0"):
        positive_float.check(np.float32("nan"), "lr")
