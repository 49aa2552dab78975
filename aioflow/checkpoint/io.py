"""OneFlow-compatible checkpoint directories, as pure functions on numpy arrays.

This module only moves arrays between memory and disk; the ``checkpoint`` module
decides which variables to save and where to assign what was loaded.

On-disk layout (the one OneFlow v0.2 / v0.3 wrote)::

    <dir>/
      <variable-name>/
        out             raw element bytes, little-endian, row-major (C order)
        meta            protobuf text format of oneflow.VariableMetaInfo (v0.3+)
        sha256sum       aioflow's addition: checksums of out and meta (see SUM_FILENAME)
      snapshot_done     empty file, written last: "the save finished"

``meta`` is what ``google.protobuf.text_format.MessageToString`` prints for the
message ``VariableMetaInfo { required ShapeProto shape = 2; required DataType
data_type = 3; }`` (oneflow/core/framework/variable_meta_info.proto, written by
``oneflow/python/framework/check_point_v2.py: SaveVarDict``), e.g.::

    shape {
      dim: 10
      dim: 512
    }
    data_type: kFloat

Data types use OneFlow's ``DataType`` enum names (oneflow/core/common/data_type.proto):
kChar=1 (read as int8), kFloat=2, kDouble=3, kInt8=4, kInt32=5, kInt64=6, kUInt8=7,
kFloat16=9. Older checkpoints (OneFlow v0.2's C++ ``SnapshotWriter``, e.g. the
documentation's ``lenet_models_1``) have no ``meta`` files: their shape and data
type must come from the caller (``read_arrays(path, expected=...)``).

``snapshot_done``: both OneFlow writers created it last, and neither OneFlow reader
(C++ ``SnapshotReader::Read``, Python ``checkpoint.get``) ever looked for it. So a
checkpoint without it still loads here, with a :class:`CheckpointWarning` (the
save that wrote it may have been interrupted); ``on_incomplete="error"`` or
``"ignore"`` choose otherwise.

>>> import os, tempfile, numpy as np
>>> tmp = tempfile.TemporaryDirectory()
>>> ckpt = os.path.join(tmp.name, "lenet")
>>> save_arrays(ckpt, {"conv1-weight": np.ones((2, 1, 3, 3), np.float32)})
>>> sorted(os.listdir(ckpt)), sorted(os.listdir(os.path.join(ckpt, "conv1-weight")))
(['conv1-weight', 'snapshot_done'], ['meta', 'out', 'sha256sum'])
>>> read_arrays(ckpt)["conv1-weight"].shape
(2, 1, 3, 3)
>>> tmp.cleanup()
"""
from __future__ import annotations

import hashlib
import math
import os
import re
import shutil
import warnings
from collections.abc import Iterable, Mapping
from typing import NamedTuple

import numpy as np

from . import swap as _swap
from .._core.callsite import user_stacklevel

__all__ = [
    "CheckpointError",
    "CheckpointExistsError",
    "CheckpointNotFoundError",
    "CheckpointWarning",
    "DATA_FILENAME",
    "META_FILENAME",
    "DONE_FILENAME",
    "SUM_FILENAME",
    "save_arrays",
    "read_arrays",
    "variable_names",
    "format_meta",
    "write_meta",
    "parse_meta",
]

from .base import (DATA_FILENAME, DONE_FILENAME, META_FILENAME, SUM_FILENAME,  # noqa: F401
                   CheckpointError, CheckpointExistsError, CheckpointNotFoundError,
                   CheckpointWarning, write_error as _write_error)


# --------------------------------------------------------------------------- dtypes
# OneFlow's DataType enum (oneflow/core/common/data_type.proto).
_ENUM_NUMBERS = {
    "kInvalidDataType": 0, "kChar": 1, "kFloat": 2, "kDouble": 3, "kInt8": 4,
    "kInt32": 5, "kInt64": 6, "kUInt8": 7, "kOFRecord": 8, "kFloat16": 9,
    "kTensorBuffer": 10, "kBFloat16": 11, "kBool": 12,
}
_NUMBER_TO_ENUM = {v: k for k, v in _ENUM_NUMBERS.items()}
# Enum names this module reads, and their numpy types (kChar: OneFlow's np.byte).
_ENUM_TO_NUMPY = {
    "kChar": np.dtype(np.int8),
    "kFloat": np.dtype(np.float32),
    "kDouble": np.dtype(np.float64),
    "kInt8": np.dtype(np.int8),
    "kInt32": np.dtype(np.int32),
    "kInt64": np.dtype(np.int64),
    "kUInt8": np.dtype(np.uint8),
    "kFloat16": np.dtype(np.float16),
}
# (kind, itemsize) -> enum name written on save; byte order plays no part.
_KIND_TO_ENUM = {
    ("f", 4): "kFloat", ("f", 8): "kDouble", ("f", 2): "kFloat16",
    ("i", 1): "kInt8", ("i", 4): "kInt32", ("i", 8): "kInt64", ("u", 1): "kUInt8",
}
_SUPPORTED = "float16, float32, float64, int8, int32, int64, uint8"


def _enum_for(dtype) -> str | None:
    dt = np.dtype(dtype)
    return _KIND_TO_ENUM.get((dt.kind, dt.itemsize))


def _as_numpy_dtype(dtype) -> np.dtype:
    """np.dtype(...) that also accepts aioflow ``DType`` handles (``.numpy``)."""
    inner = getattr(dtype, "numpy", None)
    if isinstance(inner, np.dtype):
        dtype = inner
    return np.dtype(dtype)


def _native(dtype) -> np.dtype:
    return _ENUM_TO_NUMPY[_enum_for(dtype)]


# ----------------------------------------------------------------------------- meta
def format_meta(shape, dtype) -> str:
    """The ``meta`` text OneFlow wrote for a variable of ``shape`` and ``dtype``.

    >>> print(format_meta((10, 512), "float32"), end="")
    shape {
      dim: 10
      dim: 512
    }
    data_type: kFloat
    >>> format_meta((), "int64")
    'shape {\\n}\\ndata_type: kInt64\\n'
    """
    shape = _check_shape(shape, "meta")
    enum = _enum_for(_as_numpy_dtype(dtype))
    if enum is None:
        raise CheckpointError(f"unsupported data type {dtype!r}; supported: {_SUPPORTED}")
    lines = ["shape {"] + [f"  dim: {d}" for d in shape] + ["}", f"data_type: {enum}"]
    return "\n".join(lines) + "\n"


def write_meta(path, shape, dtype) -> None:
    """Write (and fsync) the ``meta`` file at ``path`` (the file, not the folder).

    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     write_meta(os.path.join(d, "meta"), (3, 4), "float16")
    ...     with open(os.path.join(d, "meta")) as f:
    ...         parse_meta(f.read())
    ((3, 4), dtype('float16'))
    """
    _write_bytes(os.fspath(path), format_meta(shape, dtype).encode("ascii"))


_TOKEN_RE = re.compile(
    r"(?P<skip>\s+|\#[^\n]*)"
    r"|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<int>[-+]?[0-9]+)"
    r"|(?P<punct>[{}<>:\[\],;])"
)


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens, pos = [], 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise CheckpointError(f"malformed meta text: unexpected {text[pos:pos + 20]!r}")
        pos = m.end()
        if m.lastgroup != "skip":
            tokens.append((m.lastgroup, m.group()))
    tokens.append(("end", ""))
    return tokens


def _parse_fields(tokens, pos, closer):
    """Generic protobuf text format: returns ([(name, value)], pos) where value is a
    list of fields (message), a token (scalar) or a list of tokens ([a, b])."""
    fields = []
    while True:
        kind, text = tokens[pos]
        if kind == "end":
            if closer is None:
                return fields, pos
            raise CheckpointError(f"malformed meta text: missing {closer!r}")
        if kind == "punct" and text == closer:
            return fields, pos + 1
        if kind != "ident":
            raise CheckpointError(f"malformed meta text: expected a field name, got {text!r}")
        name, pos = text, pos + 1
        colon = tokens[pos] == ("punct", ":")
        if colon:
            pos += 1
        kind, text = tokens[pos]
        if kind == "punct" and text in "{<":
            sub, pos = _parse_fields(tokens, pos + 1, "}" if text == "{" else ">")
            fields.append((name, sub))
        elif not colon:
            raise CheckpointError(f"malformed meta text: expected ':' after {name!r}")
        elif kind == "punct" and text == "[":
            items, pos = [], pos + 1
            while tokens[pos] != ("punct", "]"):
                if tokens[pos][0] not in ("ident", "int"):
                    raise CheckpointError(f"malformed meta text in list {name!r}")
                items.append(tokens[pos])
                pos += 1
                if tokens[pos] == ("punct", ","):
                    pos += 1
            fields.append((name, items))
            pos += 1
        elif kind in ("ident", "int"):
            fields.append((name, (kind, text)))
            pos += 1
        else:
            raise CheckpointError(f"malformed meta text: no value for {name!r}")
        if tokens[pos][0] == "punct" and tokens[pos][1] in ",;":
            pos += 1


def _dims(name, value) -> list[int]:
    # A message is a list of (name, value) pairs whose values are never plain strings;
    # a bracketed scalar list is a list of (kind, text) tokens.
    if not (isinstance(value, list) and all(not isinstance(f[1], str) for f in value)):
        raise CheckpointError(f"malformed meta text: {name!r} must be a message {{ dim: ... }}")
    dims = []
    for sub, val in value:
        if sub != "dim":
            raise CheckpointError(f"malformed meta text: unknown field {sub!r} in {name!r}")
        for kind, text in val if isinstance(val, list) else [val]:
            if kind != "int":
                raise CheckpointError(f"malformed meta text: {name}.dim must be an integer, got {text!r}")
            dims.append(int(text))
    return dims


def parse_meta(text: str) -> tuple[tuple[int, ...], np.dtype]:
    """Parse a ``meta`` file's text into ``(shape, numpy dtype)``.

    Accepts what protobuf's text format accepts for ``VariableMetaInfo``: the
    multi-line form OneFlow wrote, one-line ``shape { dim: 10 dim: 512 }``, numeric
    enum values, and the ``stride`` message of later OneFlow versions (ignored).
    A missing or empty ``shape`` is a scalar.

    >>> parse_meta("shape { dim: 10 dim: 512 } data_type: kFloat")
    ((10, 512), dtype('float32'))
    >>> parse_meta("shape {\\n}\\ndata_type: kInt32\\n")
    ((), dtype('int32'))
    """
    if not isinstance(text, str):
        raise CheckpointError(f"meta text must be str, got {type(text).__name__}")
    fields, _ = _parse_fields(_tokenize(text), 0, None)
    shape, enum, seen = (), None, set()
    for name, value in fields:
        if name in seen:
            raise CheckpointError(f"malformed meta text: field {name!r} given twice")
        seen.add(name)
        if name == "shape":
            shape = tuple(_dims(name, value))
        elif name == "stride":
            _dims(name, value)
        elif name == "data_type":
            if not isinstance(value, tuple):
                raise CheckpointError("malformed meta text: data_type must be an enum value")
            kind, tok = value
            if kind == "int":
                if int(tok) not in _NUMBER_TO_ENUM:
                    raise CheckpointError(f"unknown data type {tok} in meta (not a OneFlow DataType)")
                tok = _NUMBER_TO_ENUM[int(tok)]
            enum = tok
        else:
            raise CheckpointError(f"malformed meta text: unknown field {name!r}")
    if enum is None:
        raise CheckpointError("malformed meta text: no data_type")
    if any(d < 0 for d in shape):
        raise CheckpointError(f"malformed meta text: negative dimension in shape {shape}")
    if enum not in _ENUM_TO_NUMPY:
        if enum in _ENUM_NUMBERS:
            raise CheckpointError(f"unsupported data type {enum} in meta; supported: {_SUPPORTED}")
        raise CheckpointError(f"unknown data type {enum!r} in meta (not a OneFlow DataType)")
    return shape, _ENUM_TO_NUMPY[enum]


# ------------------------------------------------------------------------- helpers
def _check_shape(shape, what) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in shape)
        ok = all(d >= 0 and d == s for d, s in zip(dims, shape))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise CheckpointError(f"{what}: invalid shape {shape!r} (need non-negative ints)")
    return dims


def _check_name(name) -> None:
    if not isinstance(name, str):
        raise CheckpointError(f"variable name must be a str, got {name!r}")
    bad = None
    if name in ("", ".", ".."):
        bad = "is empty or a relative directory reference"
    elif any(sep and sep in name for sep in ("/", "\\", os.sep, os.altsep)):
        bad = "contains a path separator"
    elif "\0" in name:
        bad = "contains a NUL character"
    elif name == DONE_FILENAME:
        bad = f"clashes with the {DONE_FILENAME!r} marker file"
    if bad is not None:
        raise CheckpointError(
            f"variable {name!r}: invalid name for a checkpoint folder ({bad}); "
            "each variable must be one folder directly inside the checkpoint directory"
        )


def _root(path) -> str:
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text:
        raise CheckpointError("checkpoint path is empty")
    root = os.path.abspath(text)
    if os.path.islink(root):
        root = os.path.realpath(root)
    return root


def _write_bytes(path: str, data) -> None:
    """Create ``path``, write ``data`` (any C-contiguous buffer), flush and fsync."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: str) -> None:
    if os.name == "nt":  # directories cannot be opened for fsync on Windows
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_variable(tmp: str, name: str, arr: np.ndarray) -> None:
    vdir = os.path.join(tmp, name)
    le = arr.astype(arr.dtype.newbyteorder("<"), order="C", copy=False)
    meta = format_meta(arr.shape, arr.dtype).encode("ascii")
    try:
        os.mkdir(vdir)
        _write_bytes(os.path.join(vdir, DATA_FILENAME), le)
        _write_bytes(os.path.join(vdir, META_FILENAME), meta)
        _write_bytes(os.path.join(vdir, SUM_FILENAME), format_sums(
            {DATA_FILENAME: _sha256(le), META_FILENAME: _sha256(meta)}).encode("ascii"))
        _fsync_dir(vdir)
    except OSError as e:
        raise _write_error(f"variable {name!r}: cannot write {vdir!r}", e) from e


# ------------------------------------------------------------------------ checksums
def _sha256(data) -> str:
    """Hex sha256 of bytes or a C-contiguous array's memory (hashlib reads it in place)."""
    return hashlib.sha256(data).hexdigest()


def format_sums(sums: Mapping[str, str]) -> str:
    """The ``sha256sum`` file's text: ``<hex digest>  <file name>`` per line.

    >>> print(format_sums({"out": "ab" * 32}), end="")
    abababababababababababababababababababababababababababababababab  out
    """
    return "".join(f"{digest}  {name}\n" for name, digest in sums.items())


_SUM_LINE = re.compile(r"([0-9a-f]{64}) [ *](\S+)")


def parse_sums(text: str) -> dict[str, str]:
    """File name -> sha256 hex digest, from a ``sha256sum`` file; CheckpointError if
    malformed (a line that is not ``<64 hex digits>  <name>``, an unknown or repeated
    name, or no line for ``out``).

    >>> parse_sums("ab" * 32 + "  out")["out"][:4]
    'abab'
    """
    sums: dict[str, str] = {}
    for line in text.splitlines():
        match = _SUM_LINE.fullmatch(line)
        if match is None:
            raise CheckpointError(f"malformed checksum line {line[:80]!r}")
        digest, name = match.groups()
        if name not in (DATA_FILENAME, META_FILENAME) or name in sums:
            raise CheckpointError(f"unexpected or repeated file name {name!r} in checksums")
        sums[name] = digest
    if DATA_FILENAME not in sums:
        raise CheckpointError(f"no checksum for {DATA_FILENAME!r}")
    return sums


# ---------------------------------------------------------------------------- save
def save_arrays(path, arrays: Mapping[str, np.ndarray], *, overwrite: bool = False) -> None:
    """Save ``arrays`` as a OneFlow checkpoint directory at ``path``, atomically.

    Everything is written into a hidden sibling directory (same parent, so the final
    ``os.rename`` is atomic), every file is fsynced, ``snapshot_done`` is written
    last, then the directory is renamed into place. Any failure removes the temporary
    directory and leaves ``path`` as it was.

    ``path`` may be missing or an empty directory (as in OneFlow). A non-empty one is
    refused with :class:`CheckpointExistsError` unless ``overwrite=True``; then it is
    replaced (old renamed aside, new renamed in, old deleted) -- but only if it looks
    like a checkpoint (only ``snapshot_done`` and folders holding ``out``/``meta``),
    so a mistyped path cannot wipe unrelated files. Should the process die between
    those two renames, the old checkpoint survives as ``.<name>.old-XXXXXXXX`` next
    to ``path``. Missing parent directories are created.

    Names are folder names: no path separators, not ``.``/``..``/empty, not
    ``snapshot_done``; OneFlow names such as ``conv1-weight`` or
    ``System-Train-TrainStep-train_job`` are fine. Supported dtypes: float16/32/64,
    int8/32/64, uint8. Arrays are written little-endian, row-major.

    >>> import os, tempfile, numpy as np
    >>> tmp = tempfile.TemporaryDirectory()
    >>> d = os.path.join(tmp.name, "ckpt")
    >>> save_arrays(d, {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "step": np.int64(7)})
    >>> with open(os.path.join(d, "w", "meta")) as f:
    ...     f.read()
    'shape {\\n  dim: 2\\n  dim: 3\\n}\\ndata_type: kFloat\\n'
    >>> save_arrays(d, {"w": np.zeros(1, np.float32)})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    aioflow.checkpoint.base.CheckpointExistsError: checkpoint directory ... is not empty; ...
    >>> save_arrays(d, {"w": np.zeros(1, np.float32)}, overwrite=True)
    >>> sorted(os.listdir(d))
    ['snapshot_done', 'w']
    >>> tmp.cleanup()
    """
    target = _root(path)
    if not isinstance(arrays, Mapping):
        raise CheckpointError(f"arrays must be a mapping of name -> array, got {type(arrays).__name__}")

    # 1. Validate everything before touching the disk.
    prepared: list[tuple[str, np.ndarray]] = []
    folded: dict[str, str] = {}
    for name, value in arrays.items():
        _check_name(name)
        key = name.casefold()
        if key in folded:
            raise CheckpointError(
                f"variables {folded[key]!r} and {name!r} differ only in case; their folders "
                "would collide on case-insensitive file systems"
            )
        folded[key] = name
        try:
            arr = np.asarray(value)
        except Exception as e:  # noqa: BLE001 - report which variable
            raise CheckpointError(f"variable {name!r}: cannot convert to an array: {e}") from e
        if _enum_for(arr.dtype) is None:
            raise CheckpointError(
                f"variable {name!r}: unsupported data type {arr.dtype}; supported: {_SUPPORTED}"
            )
        prepared.append((name, arr))

    parent, base = os.path.split(target)
    if not base:
        raise CheckpointError(f"cannot save a checkpoint as {target!r}")
    _require_directory_parent(target)
    _swap.tidy(target, on_missing="save")
    _swap.check_target(target, overwrite)   # refused before anything is written
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as e:
        raise _write_error(f"cannot create the folder {parent!r} for checkpoint {target!r}",
                           e) from e

    # 2. Write into a sibling temp dir, then rename into place (checkpoint.swap: it is
    # locked while this save runs, so no clean-up takes it for an abandoned leftover).
    tmp, lock = _swap.create_tmp(parent, base, target)
    try:
        for name, arr in prepared:
            _write_variable(tmp, name, arr)
        try:
            _write_bytes(os.path.join(tmp, DONE_FILENAME), b"")
        except OSError as e:
            raise _write_error(f"cannot write {DONE_FILENAME!r} in {tmp!r}", e) from e
        _fsync_dir(tmp)
        _swap.install(tmp, target, overwrite)
    except CheckpointError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _swap.unchanged(e, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        lock.release()
    _fsync_dir(parent)


def _require_directory_parent(target: str) -> None:
    """A clear error when a folder on the way to ``target`` is a file (os.makedirs would
    raise a bare FileExistsError or NotADirectoryError)."""
    path = os.path.dirname(target)
    while path and not os.path.isdir(path):
        if os.path.lexists(path):
            raise CheckpointError(
                f"cannot save checkpoint to {target!r}: {path!r} is a file, not a folder")
        up = os.path.dirname(path)
        if up == path:
            break
        path = up


# ---------------------------------------------------------------------------- read
def read_arrays(
    path,
    expected: Mapping[str, tuple[tuple[int, ...], np.dtype]] | None = None,
    *,
    names: Iterable[str] | None = None,
    strict: bool = True,
    on_incomplete: str = "warn",
) -> dict[str, np.ndarray]:
    """Read and validate variables from the checkpoint directory ``path``.

    Which variables: ``names`` if given, else the keys of ``expected`` if given, else
    every sub-folder holding a variable's file (``out``, ``meta`` or ``sha256sum``;
    sorted). For each one, shape and dtype come from its ``meta`` file; when there is none (OneFlow v0.2 checkpoints), from
    ``expected[name]``; with neither it is an error. When both exist they must agree.
    The ``out`` file must hold exactly ``prod(shape) * itemsize`` bytes.

    Every variable is checked before anything is read, and every problem found is
    reported in one :class:`CheckpointError` whose lines name the variable and the
    file; nothing is returned unless everything is valid, so a caller assigning the
    result changes nothing on failure. A ``sha256sum`` file beside ``out`` (aioflow
    writes one; OneFlow did not) must match ``out`` and ``meta``: a mismatch is refused
    naming the variable. ``strict=False`` skips (omits from the result)
    variables whose folder or ``out`` file is missing -- the caller initializes those,
    as OneFlow's loader did -- but a variable that exists and is wrong still fails.

    A missing ``snapshot_done`` gives a :class:`CheckpointWarning` by default
    (``on_incomplete="warn"``); ``"error"`` raises, ``"ignore"`` accepts silently.
    OneFlow itself never checked for it when loading.

    Returns fresh, writable, native-endian arrays, in the order of the names read.

    >>> import os, tempfile, numpy as np
    >>> tmp = tempfile.TemporaryDirectory()
    >>> d = os.path.join(tmp.name, "old_oneflow")        # v0.2 layout: no meta files
    >>> os.makedirs(os.path.join(d, "dense-bias"))
    >>> open(os.path.join(d, "snapshot_done"), "w").close()
    >>> np.arange(3, dtype="<f4").tofile(os.path.join(d, "dense-bias", "out"))
    >>> read_arrays(d, {"dense-bias": ((3,), np.float32)})
    {'dense-bias': array([0., 1., 2.], dtype=float32)}
    >>> read_arrays(d, {"dense-bias": ((4,), np.float32)})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    aioflow.checkpoint.base.CheckpointError: invalid checkpoint ...: variable 'dense-bias': data file '...out' has 12 bytes, expected 16 ...
    >>> tmp.cleanup()
    """
    if on_incomplete not in ("warn", "error", "ignore"):
        raise ValueError(f"on_incomplete must be 'warn', 'error' or 'ignore', got {on_incomplete!r}")
    root = _root(path)
    with _swap.reading(root):   # no save moves it away while it is read
        return _read(root, expected, names, strict, on_incomplete)


def _read(root, expected, names, strict, on_incomplete) -> dict[str, np.ndarray]:
    """read_arrays() of the checkpoint folder ``root``, with the reading lock held."""
    _require_checkpoint_dir(root)
    _check_done_marker(root, on_incomplete)
    exp = _expected_specs(expected)
    problems: list[str] = []
    plans: list[_Plan] = []
    for name in _names_to_read(root, names, expected, exp):
        try:
            plan = _plan_variable(root, name, exp.get(name), strict)
        except _Problem as problem:
            problems.append(str(problem))
        else:
            if plan is not None:           # None: absent, and not strict
                plans.append(plan)
    _raise_problems(root, problems)

    result: dict[str, np.ndarray] = {}
    for plan in plans:
        arr = _read_data(plan)
        if plan.sums is not None and _sha256(arr) != plan.sums[DATA_FILENAME]:
            problems.append(f"variable {plan.name!r}: data file {plan.out!r} does not match "
                            "its checksum in "
                            f"{os.path.join(os.path.dirname(plan.out), SUM_FILENAME)!r}"
                            " (the file is corrupt)")
        else:   # native byte order: a no-op on little-endian hosts
            result[plan.name] = arr.astype(plan.dtype, copy=False)
    _raise_problems(root, problems)
    return result


class _Problem(Exception):
    """What is wrong with one variable: one part of the CheckpointError of read_arrays."""


class _Plan(NamedTuple):
    """A variable that passed every check before reading: where and what to read."""
    name: str
    out: str                  # its data file
    shape: tuple[int, ...]
    dtype: np.dtype           # native byte order
    nbytes: int
    sums: dict | None         # its sha256sum file's digests, if it has one


def _raise_problems(root: str, problems: list[str]) -> None:
    if problems:
        raise CheckpointError(f"invalid checkpoint {root!r}: " + "; ".join(problems))


def _check_done_marker(root: str, on_incomplete: str) -> None:
    """Warn about (or refuse, or accept) a checkpoint without its ``snapshot_done``."""
    done = os.path.join(root, DONE_FILENAME)
    if on_incomplete != "ignore" and not os.path.isfile(done):
        msg = (
            f"checkpoint directory {root!r} has no {DONE_FILENAME!r} file: the save that "
            "wrote it may not have finished"
        )
        if on_incomplete == "error":
            raise CheckpointError(msg)
        warnings.warn(msg + "; loading it anyway", CheckpointWarning,
                      stacklevel=user_stacklevel())


def _expected_specs(expected) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """``expected`` checked: name -> (shape, native dtype)."""
    exp: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    for name, spec in (expected or {}).items():
        try:
            shape, dtype = spec
            shape = _check_shape(shape, f"variable {name!r}")
            dtype = _as_numpy_dtype(dtype)
        except CheckpointError:
            raise
        except Exception as e:  # noqa: BLE001
            raise CheckpointError(
                f"variable {name!r}: expected must map names to (shape, dtype), got {spec!r}"
            ) from e
        if _enum_for(dtype) is None:
            raise CheckpointError(
                f"variable {name!r}: unsupported expected data type {dtype}; supported: {_SUPPORTED}"
            )
        exp[name] = (shape, _native(dtype))
    return exp


def _names_to_read(root: str, names, expected, exp) -> list[str]:
    """``names``, else the expected ones, else every variable folder in ``root``."""
    if names is not None:
        if isinstance(names, str):
            names = [names]
        return list(dict.fromkeys(names))
    if expected is not None:
        return list(exp)
    return _names_in(root)


def _plan_variable(root: str, name, want, strict: bool) -> _Plan | None:
    """Variable ``name`` checked before anything is read: its name, its files, its
    checksums' and meta's agreement with them and with ``want`` (its expected shape and
    dtype, or None), and its data file's size. None where it is absent and ``strict`` is
    off; raises :class:`_Problem` naming what is wrong."""
    try:
        _check_name(name)
    except CheckpointError as e:
        raise _Problem(str(e)) from None
    vdir = os.path.join(root, name)
    out = os.path.join(vdir, DATA_FILENAME)
    if not _files_present(name, vdir, out, strict):
        return None
    sums_path = os.path.join(vdir, SUM_FILENAME)
    sums = _read_sums(name, sums_path)
    meta = os.path.join(vdir, META_FILENAME)
    shape, dtype = _agreed_spec(name, meta, _read_meta(name, meta, sums, sums_path), want)
    nbytes = _data_size(name, out, shape, dtype)
    return _Plan(name, out, shape, dtype, nbytes, sums)


def _files_present(name: str, vdir: str, out: str, strict: bool) -> bool:
    """Whether the variable's folder and data file exist (a missing one is a problem
    only when ``strict``)."""
    if not os.path.isdir(vdir):
        if strict:
            raise _Problem(f"variable {name!r}: not found (no folder {vdir!r})")
        return False
    if not os.path.isfile(out):
        if strict:
            raise _Problem(f"variable {name!r}: data file {out!r} is missing")
        return False
    return True


def _read_sums(name: str, sums_path: str) -> dict | None:
    """The digests of the variable's ``sha256sum`` file (None: it has none)."""
    if not os.path.isfile(sums_path):
        return None
    try:
        with open(sums_path, encoding="ascii") as f:
            return parse_sums(f.read(4096))
    except (CheckpointError, OSError, UnicodeDecodeError) as e:
        raise _Problem(f"variable {name!r}: bad checksum file {sums_path!r}: {e}") from None


def _read_meta(name: str, meta: str, sums, sums_path: str):
    """(shape, dtype) from the variable's ``meta`` file, checked against its checksum;
    None where it has none (OneFlow v0.2), unless its checksum file lists one."""
    if not os.path.isfile(meta):
        if sums is not None and META_FILENAME in sums:
            raise _Problem(f"variable {name!r}: meta file {meta!r} is missing (its "
                           f"checksum file lists one)")
        return None
    try:
        with open(meta, "rb") as f:
            meta_bytes = f.read(1 << 16)
        if sums is not None and _sha256(meta_bytes) != sums.get(META_FILENAME):
            raise _Problem(f"variable {name!r}: meta file {meta!r} does not match "
                           f"its checksum in {sums_path!r} (the file is corrupt)")
        return parse_meta(meta_bytes.decode("utf-8"))
    except (CheckpointError, OSError, UnicodeDecodeError) as e:
        raise _Problem(f"variable {name!r}: bad meta file {meta!r}: {e}") from None


def _agreed_spec(name: str, meta: str, spec, want) -> tuple[tuple[int, ...], np.dtype]:
    """The variable's (shape, dtype): its meta's and the expected one, which must agree
    where both are known; at least one must be."""
    if spec is not None and want is not None:
        if spec[0] != want[0]:
            raise _Problem(
                f"variable {name!r}: meta file {meta!r} says shape {spec[0]}, "
                f"expected {want[0]}"
            )
        if spec[1] != want[1]:
            raise _Problem(
                f"variable {name!r}: meta file {meta!r} says data type {spec[1]}, "
                f"expected {want[1]}"
            )
    spec = spec or want
    if spec is None:
        raise _Problem(
            f"variable {name!r}: no meta file {meta!r} and no expected shape/dtype "
            "(older OneFlow checkpoints have no meta; pass expected=...)"
        )
    return spec


def _data_size(name: str, out: str, shape, dtype) -> int:
    """The bytes ``shape`` and ``dtype`` take, which the data file must hold exactly."""
    nbytes = math.prod(shape) * dtype.itemsize
    actual = os.path.getsize(out)
    if actual != nbytes:
        raise _Problem(
            f"variable {name!r}: data file {out!r} has {actual} bytes, expected {nbytes} "
            f"(shape {shape}, {dtype})" + (" -- truncated" if actual < nbytes else "")
        )
    return nbytes


def _read_data(plan: _Plan) -> np.ndarray:
    """The variable's data file in a fresh little-endian array; CheckpointError if it
    cannot be read or no longer holds the bytes checked."""
    arr = np.empty(plan.shape, dtype=plan.dtype.newbyteorder("<"))
    view = memoryview(arr.reshape(-1).view(np.uint8))
    got = 0
    try:
        with open(plan.out, "rb") as f:
            while got < plan.nbytes:
                n = f.readinto(view[got:])
                if not n:
                    break
                got += n
            extra = f.read(1)
    except OSError as e:
        raise CheckpointError(f"variable {plan.name!r}: cannot read {plan.out!r}: {e}") from e
    if got != plan.nbytes or extra:
        raise CheckpointError(
            f"variable {plan.name!r}: data file {plan.out!r} changed while reading "
            f"(expected {plan.nbytes} bytes)"
        )
    return arr


def variable_names(path) -> list[str]:
    """The variables a checkpoint directory holds: its folders with an ``out``, ``meta`` or
    ``sha256sum`` file, sorted.

    >>> import os, tempfile, numpy as np
    >>> with tempfile.TemporaryDirectory() as d:
    ...     save_arrays(os.path.join(d, "m"), {"b": np.ones(1), "a": np.ones(2)})
    ...     variable_names(os.path.join(d, "m"))
    ['a', 'b']
    """
    root = _root(path)
    with _swap.reading(root):
        _require_checkpoint_dir(root)
        return _names_in(root)


def _names_in(root: str) -> list[str]:
    # A folder holding any of a variable's files is a variable: one whose ``out`` was
    # lost is then reported missing instead of silently left out.
    return sorted(e for e in os.listdir(root)
                  if any(os.path.isfile(os.path.join(root, e, f))
                         for f in (DATA_FILENAME, META_FILENAME, SUM_FILENAME)))


def _require_checkpoint_dir(root: str) -> None:
    if not os.path.isdir(root):
        what = "is not a directory" if os.path.lexists(root) else "does not exist"
        raise CheckpointNotFoundError(f"checkpoint directory {root!r} {what}")
