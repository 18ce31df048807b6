"""sat_tutorial.mnist: the IDX and .amat readers, fetching with checksums, the offline
stand-in, and RAM's and DRAW's data paths (one training step each) with an empty data
folder and the network cut."""

import gzip, hashlib, io, os, urllib.error

import numpy as np
import pytest
import torch

import sat_tutorial.binarized_mnist as binarized
import sat_tutorial.mnist_sources as sources
from sat_tutorial.core import data_root
from sat_tutorial.draw import DRAW, draw_loss
from sat_tutorial.mnist import (
    MNIST_FILES,
    TASKS,
    GlimpseMNIST,
    have_mnist,
    load_mnist,
    make_layout,
    read_idx,
    render,
)
from sat_tutorial.binarized_mnist import (
    DYNAMIC_SOURCE,
    FIXED_SOURCE,
    load_binarized_mnist,
)
from sat_tutorial.mnist_sources import (
    STANDIN_SIZES,
    STANDIN_SOURCE,
    fetch,
    standin_mnist,
)
from sat_tutorial.ram import RAM, ram_loss

HAVE_MNIST = all(
    (data_root() / "mnist" / "raw" / f).exists()
    for pair in MNIST_FILES.values()
    for f in pair
)
needs_mnist = pytest.mark.skipif(
    not HAVE_MNIST, reason="MNIST not in $SAT_TUTORIAL_DATA/mnist/raw"
)


@pytest.fixture(autouse=True)
def _one_thread_and_fresh_network(monkeypatch):
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    monkeypatch.setattr(sources, "_network", {"down": False})
    yield
    torch.set_num_threads(n)


@pytest.fixture
def no_data_no_network(tmp_path, monkeypatch):
    "An empty data folder, fetching allowed, and an opener that fails: the calls made."
    calls = []

    def dead(url, timeout):
        calls.append(url)
        raise urllib.error.URLError("network unreachable (test)")

    monkeypatch.setenv("SAT_TUTORIAL_DATA", str(tmp_path))
    monkeypatch.delenv("SAT_TUTORIAL_OFFLINE", raising=False)
    monkeypatch.setattr(sources, "_urlopen", dead)
    return calls


def fake_digits(n=60, seed=0):
    "Random 'digits': uint8 (n, 28, 28) with a few bright strokes, labels 0..9."
    rng = np.random.default_rng(seed)
    x = (rng.random((n, 28, 28)) > 0.8).astype(np.uint8) * rng.integers(
        1, 256, (n, 28, 28)
    ).astype(np.uint8)
    return x, rng.integers(0, 10, n)


# ---------------------------------------------------------------- no data, no network


def test_ram_data_path_and_one_step_offline(no_data_no_network, capsys, monkeypatch):
    monkeypatch.setattr(sources, "_notice", {"shown": False})
    X, Y = load_mnist("train")
    assert X.shape == (STANDIN_SIZES["train"], 28, 28) and X.dtype == np.uint8
    assert Y.dtype == np.int64 and set(np.unique(Y)) == set(range(10))
    # one failed connection per mirror of the first file, then no more attempts
    assert len(no_data_no_network) == len(sources.MIRRORS["mnist/raw"])
    err = capsys.readouterr().err
    assert err.count("could not download") == 1 and "put it in" in err
    assert err.count("not MNIST's") == 1
    assert not have_mnist("test")
    ds = GlimpseMNIST("translated", "train", seed=0, limit=64)
    x, y = ds.batch(np.arange(32))
    assert x.shape == (32, 1, 60, 60) and y.shape == (32,)
    assert len(no_data_no_network) == len(sources.MIRRORS["mnist/raw"])
    torch.manual_seed(0)
    model = RAM(g=12, k=3, glimpses=3, hidden=32, glimpse_dim=32)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    before = [p.detach().clone() for p in model.parameters()]
    loss = ram_loss(model(x), y)["loss"]
    opt.zero_grad()
    loss.backward()
    opt.step()
    assert torch.isfinite(loss)
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters()))
    assert capsys.readouterr().err.count("not MNIST's") == 0  # said once


def test_draw_data_path_and_one_step_offline(no_data_no_network, capsys):
    splits = [load_binarized_mnist(s) for s in ("train", "valid", "test")]
    assert [s.source for s in splits] == [STANDIN_SOURCE] * 3
    n = STANDIN_SIZES["train"]
    assert [len(s) for s in splits] == [n * 5 // 6, n - n * 5 // 6, 2_000]
    tr, _, te = splits
    xb = tr.batch(torch.arange(16))
    assert xb.shape == (16, 784) and xb.dtype == torch.float32
    assert set(torch.unique(xb).tolist()) == {0.0, 1.0}
    assert te.x.dtype == torch.uint8 and set(torch.unique(te.x).tolist()) == {0, 1}
    # one failed connection per mirror, for the first file only
    assert len(no_data_no_network) == len(sources.MIRRORS["binarized_mnist"])
    with pytest.raises(FileNotFoundError, match="binarized_mnist"):
        load_binarized_mnist("train", source="fixed")
    torch.manual_seed(0)
    model = DRAW(T=2, read_n=2, write_n=3, z_dim=4, hidden=16)
    L_x, L_z = draw_loss(model(xb), xb)
    loss = (L_x + L_z).mean()
    loss.backward()
    assert torch.isfinite(loss) and all(p.grad is not None for p in model.parameters())


def test_offline_flag_forbids_fetching(no_data_no_network, monkeypatch):
    monkeypatch.setenv("SAT_TUTORIAL_OFFLINE", "1")
    load_mnist("test")
    load_binarized_mnist("test")
    assert no_data_no_network == []
    with pytest.raises(FileNotFoundError) as e:
        load_mnist("train", standin=False)
    msg = str(e.value)
    assert str(data_root() / "mnist" / "raw" / "train-images-idx3-ubyte.gz") in msg
    assert "t10k-labels-idx1-ubyte.gz" in msg
    with pytest.raises(ValueError, match="split"):
        load_mnist("val")
    with pytest.raises(ValueError, match="split"):
        load_binarized_mnist("dev")


# ---------------------------------------------------------------- the stand-in


def test_standin_properties():
    X, Y = standin_mnist("train")
    Xt, Yt = standin_mnist("test")
    assert X.shape == (STANDIN_SIZES["train"], 28, 28) and X.dtype == np.uint8
    assert Xt.shape == (STANDIN_SIZES["test"], 28, 28) and Yt.dtype == np.int64
    for y in (Y, Yt):  # each digit exactly a tenth
        assert (np.bincount(y, minlength=10) == len(y) // 10).all()
    assert not np.array_equal(X[: len(Xt)], Xt)  # two splits, two draws
    standin_mnist.cache_clear()
    X2, Y2 = standin_mnist("train")
    assert np.array_equal(X, X2) and np.array_equal(Y, Y2)  # deterministic
    assert 0.08 < X.mean() / 255 < 0.2  # about MNIST's ink (0.13)
    assert len(np.unique(X.reshape(len(X), -1), axis=0)) == len(X)  # all distinct
    # the labels are the images' digits: nearest class mean, fitted on train,
    # reads the test split far above chance (10 %)
    means = np.stack([X[Y == d].reshape(-1, 784).mean(0) for d in range(10)])
    Xf = Xt.reshape(-1, 784).astype(np.float64)
    dist = (Xf**2).sum(1)[:, None] - 2 * Xf @ means.T + (means**2).sum(1)
    accuracy = (dist.argmin(1) == Yt).mean()
    assert accuracy > 0.6, accuracy


def test_standin_binarization():
    tr = binarized._dynamic_split("train", standin_mnist("train")[0], STANDIN_SOURCE)
    assert tr.dynamic
    torch.manual_seed(0)
    b1, b2 = tr.batch(torch.arange(500)), tr.batch(torch.arange(500))
    assert not torch.equal(b1, b2)  # binarised afresh at every draw
    grey = tr.x[:500]
    assert ((b1 == 1) <= (grey > 0)).all()  # never on where there is no ink
    assert abs(b1.mean() - grey.mean()) < 0.01  # E[bernoulli(p)] = p
    te1 = binarized._dynamic_split("test", standin_mnist("test")[0], STANDIN_SOURCE)
    te2 = binarized._dynamic_split("test", standin_mnist("test")[0], STANDIN_SOURCE)
    assert not te1.dynamic and torch.equal(te1.x, te2.x)  # the test bits are fixed


# ---------------------------------------------------------------- fetching


def _serve(monkeypatch, files):
    calls = []

    class Response(io.BytesIO):
        headers = {"Content-Length": "0"}

    def opener(url, timeout):
        calls.append(url)
        name = url.rsplit("/", 1)[1]
        if name not in files:
            raise urllib.error.URLError("not here")
        return Response(files[name])

    monkeypatch.setattr(sources, "_urlopen", opener)
    return calls


def test_fetch_keeps_only_files_with_the_published_md5(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SAT_TUTORIAL_DATA", str(tmp_path))
    monkeypatch.delenv("SAT_TUTORIAL_OFFLINE", raising=False)
    good = b"0 1\n1 0\n"
    md5 = dict(
        sources.MD5, **{"binarized_mnist_test.amat": hashlib.md5(good).hexdigest()}
    )
    monkeypatch.setattr(sources, "MD5", md5)
    _serve(
        monkeypatch,
        {"binarized_mnist_test.amat": good, "t10k-labels-idx1-ubyte.gz": good},
    )
    p = fetch("binarized_mnist", "binarized_mnist_test.amat")
    assert p == tmp_path / "binarized_mnist" / "binarized_mnist_test.amat.gz"
    assert gzip.open(p).read() == good
    assert fetch("mnist/raw", "t10k-labels-idx1-ubyte.gz") is None  # wrong MD5
    assert list((tmp_path / "mnist" / "raw").iterdir()) == []  # nothing left behind
    err = capsys.readouterr().err.splitlines()  # tqdm's bars, and our one line
    said = [line for line in err if line.startswith("sat_tutorial:")]
    assert len(said) == 1 and "MD5" in said[0] and "mnist/raw" in said[0]


def test_fetched_mnist_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("SAT_TUTORIAL_DATA", str(tmp_path))
    monkeypatch.delenv("SAT_TUTORIAL_OFFLINE", raising=False)
    files, X, Y = _fake_test_split(monkeypatch)
    calls = _serve(monkeypatch, files)
    got, labels = load_mnist("test")
    assert np.array_equal(got, X) and np.array_equal(labels, Y)
    assert len(calls) == 2 and have_mnist("test") and len(calls) == 2  # kept


# ---------------------------------------------------------------- readers and tasks


def test_read_idx_roundtrip_and_errors(tmp_path):
    arr = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    header = bytes([0, 0, 8, 3]) + b"".join(
        int(n).to_bytes(4, "big") for n in arr.shape
    )
    (tmp_path / "a-idx3-ubyte.gz").write_bytes(gzip.compress(header + arr.tobytes()))
    (tmp_path / "a-idx3-ubyte").write_bytes(header + arr.tobytes())
    assert np.array_equal(read_idx(tmp_path / "a-idx3-ubyte.gz"), arr)
    assert np.array_equal(read_idx(tmp_path / "a-idx3-ubyte"), arr)
    (tmp_path / "short.gz").write_bytes(gzip.compress(header + arr.tobytes()[:-1]))
    with pytest.raises(ValueError, match="header says"):
        read_idx(tmp_path / "short.gz")
    (tmp_path / "bad.gz").write_bytes(gzip.compress(b"\x00\x00\x0d\x01abcd"))
    with pytest.raises(ValueError, match="not an unsigned-byte IDX"):
        read_idx(tmp_path / "bad.gz")


@pytest.mark.parametrize("task", list(TASKS))
def test_generated_tasks(task):
    size, K = TASKS[task]
    X, Y = fake_digits(60)
    ds = GlimpseMNIST(task, "train", seed=7, images=X, labels=Y)
    x, y = ds.batch(np.arange(10))
    assert x.shape == (10, 1, size, size) and x.dtype == torch.float32
    assert 0 <= x.min() and x.max() <= 1
    assert torch.equal(y, torch.from_numpy(Y[:10]))
    raw = render(X, np.arange(10), ds.layout, size)
    for i in range(10):  # the digit is there, whole
        r, c = ds.layout["digit"][i]
        assert (raw[i, r : r + 28, c : c + 28] >= X[i]).all()
    if K == 0:
        assert np.array_equal(
            raw.sum((1, 2), dtype=np.int64), X[:10].sum((1, 2), dtype=np.int64)
        )
    else:
        src = ds.layout["src"]
        assert (src != np.arange(60)[:, None]).all() and src.max() < 60
    # same seed, same pixels; another seed, others (unless the canvas is MNIST's own)
    again = GlimpseMNIST(task, "train", seed=7, images=X, labels=Y)
    assert torch.equal(x, again.batch(np.arange(10))[0])
    other = GlimpseMNIST(task, "train", seed=8, images=X, labels=Y)
    assert torch.equal(x, other.batch(np.arange(10))[0]) == (task == "mnist")


def test_layout_is_vectorised_and_in_bounds():
    L = make_layout(60000, 100, 8, 60000, seed=0)  # the full cluttered100 layout
    assert L["digit"].max() <= 72 and L["paste"].max() <= 92 and L["crop"].max() <= 20
    assert (L["src"] != np.arange(60000)[:, None]).all()


@needs_mnist
def test_real_mnist():
    X, Y = load_mnist("test")
    assert X.shape == (10000, 28, 28) and Y.shape == (10000,)
    assert set(np.unique(Y)) == set(range(10))
    for split, (images, labels) in MNIST_FILES.items():
        for name in (images, labels):
            digest = hashlib.md5((data_root() / "mnist" / "raw" / name).read_bytes())
            assert digest.hexdigest() == sources.MD5[name]
    x, _ = GlimpseMNIST("mnist", "test").batch([0, 1])
    assert torch.equal(x[:, 0] * 255, torch.from_numpy(X[:2].astype(np.float32)))


@pytest.mark.skipif(not HAVE_MNIST, reason="mnist/raw not under SAT_TUTORIAL_DATA")
def test_dynamic_fallback_is_labelled(tmp_path, monkeypatch, capsys):
    (tmp_path / "mnist").symlink_to(data_root() / "mnist")
    monkeypatch.setenv("SAT_TUTORIAL_DATA", str(tmp_path))
    monkeypatch.setenv("SAT_TUTORIAL_OFFLINE", "1")
    tr = load_binarized_mnist("train")
    assert "dynamically binarised" in capsys.readouterr().out
    assert tr.dynamic and tr.source == DYNAMIC_SOURCE and len(tr) == 50_000
    b1, b2 = tr.batch(torch.arange(32)), tr.batch(torch.arange(32))
    assert set(torch.unique(b1).tolist()) <= {0.0, 1.0} and not torch.equal(b1, b2)
    with pytest.raises(FileNotFoundError):
        load_binarized_mnist("train", source="fixed")
    assert len(load_binarized_mnist("test", source="dynamic")) == 10_000
    assert FIXED_SOURCE != DYNAMIC_SOURCE != STANDIN_SOURCE


# ---------------------------------------------------------------- the data's origin

SHARED = data_root()  # the real files (tests run with SAT_TUTORIAL_DATA=../shared/data)
REAL = {
    name: SHARED / "mnist" / "raw" / name
    for pair in MNIST_FILES.values()
    for name in pair
}
REAL.update(
    {
        f"binarized_mnist_{s}.amat.gz": SHARED
        / "binarized_mnist"
        / f"binarized_mnist_{s}.amat.gz"
        for s in ("train", "valid", "test")
    }
)
needs_real = pytest.mark.skipif(
    not all(p.exists() for p in REAL.values()),
    reason="MNIST and binarized MNIST not under SAT_TUTORIAL_DATA",
)


def data_with(tmp_path, monkeypatch, *names, offline=True):
    """A data folder holding copies of the real files `names` (nothing else); the
    stand-in notice reset; fetching off unless `offline=False`."""
    root = tmp_path / "data"
    for name in names:
        sub = "binarized_mnist" if ".amat" in name else "mnist/raw"
        (root / sub).mkdir(parents=True, exist_ok=True)
        (root / sub / name).write_bytes(REAL[name].read_bytes())
    root.mkdir(exist_ok=True)
    monkeypatch.setenv("SAT_TUTORIAL_DATA", str(root))
    if offline:
        monkeypatch.setenv("SAT_TUTORIAL_OFFLINE", "1")
    else:
        monkeypatch.delenv("SAT_TUTORIAL_OFFLINE", raising=False)
    monkeypatch.setattr(sources, "_notice", {"said": set()})
    return root


def no_standin(monkeypatch):
    "Make any use of the stand-in digits fail the test."

    def forbidden(*a, **k):
        raise AssertionError("the stand-in digits were used")

    monkeypatch.setattr(sources, "standin_mnist", forbidden)  # load_mnist's
    monkeypatch.setattr(binarized, "standin_mnist", forbidden)  # DRAW's


@needs_real
def test_a_partial_mnist_is_an_error_naming_the_missing_file(
    tmp_path, monkeypatch, capsys
):
    root = data_with(tmp_path, monkeypatch, "t10k-labels-idx1-ubyte.gz")
    no_standin(monkeypatch)
    raw = root / "mnist" / "raw"
    for call in (
        lambda: load_mnist("test"),
        lambda: load_mnist("test", download=False, standin=False),
        lambda: GlimpseMNIST("translated", "test", seed=0, limit=8),
        lambda: have_mnist("test"),
        lambda: load_binarized_mnist("test", source="dynamic"),
        lambda: load_binarized_mnist("test"),  # auto: no .amat, so MNIST's
    ):
        with pytest.raises(FileNotFoundError) as e:
            call()
        msg = str(e.value)
        assert str(raw / "t10k-images-idx3-ubyte.gz") in msg and "\n" not in msg
        assert "t10k-labels-idx1-ubyte.gz" in msg  # what is there
    with pytest.raises(
        FileNotFoundError, match="train-images-idx3-ubyte.gz is missing"
    ):
        load_mnist("train")  # the other split: no file of it, but MNIST is partial
    assert "stand-in" not in capsys.readouterr().err


@needs_real
def test_a_partial_mnist_is_not_mixed_even_where_fetching_fails(
    tmp_path, monkeypatch, capsys
):
    data_with(tmp_path, monkeypatch, "t10k-labels-idx1-ubyte.gz", offline=False)
    no_standin(monkeypatch)
    calls = _serve(monkeypatch, {})  # a network that has nothing
    with pytest.raises(FileNotFoundError, match="t10k-images-idx3-ubyte.gz is missing"):
        load_mnist("test")
    assert len(calls) == len(sources.MIRRORS["mnist/raw"])  # it tried, then said so


@needs_real
def test_ram_train_with_real_digits_and_no_test_labels_is_one_line(
    tmp_path, monkeypatch, capsys
):
    from sat_tutorial.cli import main

    names = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"]
    root = data_with(tmp_path, monkeypatch, *names, "t10k-images-idx3-ubyte.gz")
    no_standin(monkeypatch)
    out = tmp_path / "run"
    argv = ["ram", "train", "--steps", "1", "--limit", "20", "--quiet"]
    assert main([*argv, "--device", "cpu", "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    missing = root / "mnist" / "raw" / "t10k-labels-idx1-ubyte.gz"
    assert err[-1].startswith("sat-tutorial: error: ") and str(missing) in err[-1]


@needs_real
def test_a_partial_binarized_mnist_is_an_error_naming_the_missing_file(
    tmp_path, monkeypatch, capsys
):
    from sat_tutorial.cli import main

    names = ["binarized_mnist_test.amat.gz", *MNIST_FILES["train"]]
    root = data_with(tmp_path, monkeypatch, *names)
    no_standin(monkeypatch)
    folder = root / "binarized_mnist"
    assert load_binarized_mnist("test", "fixed").source == FIXED_SOURCE
    for split in ("train", "valid"):
        for source in ("auto", "fixed"):  # never the dynamic MNIST beside it
            with pytest.raises(FileNotFoundError) as e:
                load_binarized_mnist(split, source)
            assert f"{folder}/binarized_mnist_{split}.amat" in str(e.value)
            assert "binarized_mnist_test.amat" in str(e.value)
    assert main(["draw", "train", "--steps", "1", "--out", str(tmp_path / "r")]) == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "Traceback" not in line and str(folder / "binarized_mnist_train") in line


@needs_real
@pytest.mark.parametrize(
    "name", ["t10k-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz"]
)
def test_a_file_with_one_byte_changed_is_an_error_naming_it(
    tmp_path, monkeypatch, name
):
    root = data_with(tmp_path, monkeypatch, *MNIST_FILES["test"])
    no_standin(monkeypatch)
    p = root / "mnist" / "raw" / name
    plain = bytearray(gzip.decompress(p.read_bytes()))
    plain[-1] ^= 1  # the last pixel or label: still a well-formed IDX file
    p.write_bytes(gzip.compress(bytes(plain), mtime=0))
    with pytest.raises(ValueError) as e:
        load_mnist("test")
    msg = str(e.value)
    assert str(p) in msg and f"not the published {name}" in msg and "\n" not in msg
    raw = bytearray(REAL[name].read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # one byte of the compressed file itself
    p.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=str(p)):
        load_mnist("test")


@needs_real
def test_a_changed_amat_file_is_an_error_naming_it(tmp_path, monkeypatch):
    root = data_with(tmp_path, monkeypatch, "binarized_mnist_valid.amat.gz")
    p = root / "binarized_mnist" / "binarized_mnist_valid.amat.gz"
    plain = bytearray(gzip.decompress(p.read_bytes()))
    plain[0] ^= 1  # '0' <-> '1': still a well-formed .amat file
    p.write_bytes(gzip.compress(bytes(plain), mtime=0))
    with pytest.raises(ValueError, match="not the published binarized_mnist_valid"):
        load_binarized_mnist("valid", "fixed")
    p.write_bytes(REAL["binarized_mnist_valid.amat.gz"].read_bytes()[:100_000])
    with pytest.raises(ValueError, match=f"{p} could not be read"):  # truncated
        load_binarized_mnist("valid", "fixed")


def test_sat_tutorial_data_pointing_at_a_file_is_one_line(
    tmp_path, monkeypatch, capsys
):
    from sat_tutorial.cli import main

    f = tmp_path / "not-a-folder"
    f.write_text("x")
    monkeypatch.setenv("SAT_TUTORIAL_DATA", str(f))
    monkeypatch.setenv("SAT_TUTORIAL_OFFLINE", "1")
    no_standin(monkeypatch)
    for call in (load_mnist, have_mnist, load_binarized_mnist):
        with pytest.raises(
            NotADirectoryError, match=f"SAT_TUTORIAL_DATA={f} is a file"
        ):
            call("test")
    assert main(["ram", "train", "--steps", "1", "--out", str(tmp_path / "r")]) == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("sat-tutorial: error: SAT_TUTORIAL_DATA=") and str(f) in line


def test_the_standin_notice_names_the_folders_searched(tmp_path, monkeypatch, capsys):
    root = data_with(tmp_path, monkeypatch)  # an empty data folder
    load_mnist("test")
    err = capsys.readouterr().err
    assert (
        f"no MNIST files in {root / 'mnist' / 'raw'}/" in err and "not MNIST's" in err
    )
    load_binarized_mnist("test")
    err = capsys.readouterr().err
    assert f"{root / 'binarized_mnist'}/ nor in {root / 'mnist' / 'raw'}/" in err
    load_mnist("test")
    assert capsys.readouterr().err == ""  # once per folder
    with pytest.raises(FileNotFoundError, match="t10k-images-idx3-ubyte.gz not found"):
        load_mnist("test", download=False, standin=False)
    with pytest.raises(FileNotFoundError, match="binarized_mnist_test.amat"):
        load_binarized_mnist("test", "fixed", download=False)


@needs_real
def test_files_on_disk_pass_their_md5_once_per_version(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "_md5_ok", set())
    for p in REAL.values():
        assert sources.check_md5(p) == p  # the real files pass
    digests = []
    real_md5 = hashlib.md5

    def counting(*a):
        digests.append(1)
        return real_md5(*a)

    monkeypatch.setattr(sources.hashlib, "md5", counting)
    for p in REAL.values():
        sources.check_md5(p)
    assert digests == []  # remembered
    copy = tmp_path / "t10k-labels-idx1-ubyte.gz"
    copy.write_bytes(REAL["t10k-labels-idx1-ubyte.gz"].read_bytes())
    sources.check_md5(copy)
    sources.check_md5(copy)
    assert len(digests) == 1
    os.utime(copy, ns=(1, 1))  # a new version of the file: checked again
    sources.check_md5(copy)
    assert len(digests) == 2


def _fake_test_split(monkeypatch):
    "Small IDX files served as MNIST's test split, their MD5s made the published ones."
    X, Y = fake_digits(20)
    head = lambda *shape: (
        bytes([0, 0, 8, len(shape)]) + np.array(shape, ">u4").tobytes()
    )
    files = {
        "t10k-images-idx3-ubyte.gz": gzip.compress(head(20, 28, 28) + X.tobytes()),
        "t10k-labels-idx1-ubyte.gz": gzip.compress(
            head(20) + Y.astype(np.uint8).tobytes()
        ),
    }
    md5 = dict(sources.MD5, **{k: hashlib.md5(v).hexdigest() for k, v in files.items()})
    monkeypatch.setattr(sources, "MD5", md5)
    return files, X, Y


def test_download_true_fetches_even_offline(tmp_path, monkeypatch, capsys):
    data_with(tmp_path, monkeypatch)  # SAT_TUTORIAL_OFFLINE=1
    files, X, _ = _fake_test_split(monkeypatch)
    calls = _serve(monkeypatch, files)
    assert load_mnist("test")[0].shape == (STANDIN_SIZES["test"], 28, 28)  # offline
    assert calls == []
    got, _ = load_mnist("test", download=True)
    assert np.array_equal(got, X) and len(calls) == 2


def test_download_true_that_fails_is_one_line_not_the_standin(
    tmp_path, monkeypatch, capsys
):
    from sat_tutorial.cli import main

    root = data_with(tmp_path, monkeypatch)  # SAT_TUTORIAL_OFFLINE=1
    no_standin(monkeypatch)
    calls = _serve(monkeypatch, {})  # nothing to be had
    with pytest.raises(ConnectionError, match="could not download t10k-images") as e:
        load_mnist("test", download=True)
    assert str(root / "mnist" / "raw") in str(e.value)
    assert len(calls) == len(sources.MIRRORS["mnist/raw"])
    argv = ["ram", "train", "--steps", "1", "--download", "--out", str(tmp_path / "r")]
    assert main(argv) == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("sat-tutorial: error: could not download train-images")
