"""Property-based fuzzing of the two boundaries where outside bytes come in.

* The job call: random shapes, dtypes, byte orders, layouts, values and containers. Only
  the documented errors come out (``TypeError``, ``ValueError``: wrong container, shape,
  dtype, out-of-range or non-finite values), nothing else, no warning; a refused call
  changes no variable; the model's variables never become non-finite.
* The checkpoint reader: random truncations, byte flips and appended bytes in ``meta``,
  ``out``, ``sha256sum`` and ``snapshot_done``. Only ``CheckpointError`` comes out; a load
  that succeeds returns exactly what was saved (checksums see every change to ``out`` and
  ``meta``); a refused ``CheckPoint().load`` changes no variable.

Bounded: a few dozen examples each, no deadline, no example database (a few seconds).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from typing import Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import aioflow as flow
import aioflow.typing as tp
from aioflow.checkpoint.io import CheckpointError, parse_sums, read_arrays, save_arrays

FUZZ = settings(max_examples=60, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])

DTYPES = ["float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool",
          "complex64", "uint64"]
SPECIALS = [0.0, -0.0, 1.0, np.nan, np.inf, -np.inf, 1e39, -1e39, 3.4028235e38, 2 ** 31,
            -(2 ** 31) - 1, 1e-45]


@st.composite
def arrays(draw, shape):
    """An array that is often right for ``shape``, often subtly wrong."""
    if draw(st.booleans()):
        shape = tuple(draw(st.lists(st.integers(0, 5), max_size=3)))
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    n = int(np.prod(shape))
    values = draw(st.lists(st.one_of(st.floats(-10, 10), st.sampled_from(SPECIALS)),
                           min_size=n, max_size=n))
    with np.errstate(all="ignore"):
        arr = np.asarray(values, dtype=np.float64).reshape(shape)
        if dtype.kind in "iub":
            arr = np.nan_to_num(arr, nan=0, posinf=0, neginf=0)
            if dtype.kind != "b":
                info = np.iinfo(np.int64 if dtype.kind == "i" else np.uint64)
                arr = np.clip(arr, max(info.min, -2 ** 62), min(info.max, 2 ** 62))
        arr = np.array(arr, dtype=dtype)   # np.array: 0-d stays an array, not a scalar
    if draw(st.booleans()) and dtype.itemsize > 1:   # the other byte order, same values
        arr = arr.astype(arr.dtype.newbyteorder(">" if arr.dtype.byteorder != ">" else "<"))
    layout = draw(st.sampled_from(["c", "fortran", "strided", "readonly"]))
    if layout == "fortran":
        arr = np.asfortranarray(arr)
    elif layout == "strided" and arr.ndim:   # a view with gaps, same shape and values
        wide = np.repeat(arr, 2, axis=-1)
        arr = wide[..., ::2]
    elif layout == "readonly":
        arr = arr.copy()
        arr.flags.writeable = False
    return arr


def values_for(shape):
    return st.one_of(
        arrays(shape),
        arrays(shape).map(lambda a: a.tolist()),                 # a list, not an array
        arrays(shape).map(lambda a: (a,)),
        arrays(shape).map(lambda a: {"x": a}),
        st.sampled_from([None, 1.5, "x", b"\0\0\0\0"]),
    )


@pytest.fixture
def jobs():
    flow.clear_default_session()

    @flow.global_function(type="train")
    def fuzz_train(x: tp.Numpy.Placeholder((4, 3)),
                   y: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        logits = flow.layers.dense(x, 2, name="fz")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.Adam(0.01).minimize(loss)
        return loss

    @flow.global_function(type="predict")
    def fuzz_pair(pair: Tuple[tp.Numpy.Placeholder((2,)),
                              tp.Numpy.Placeholder((3,), dtype=flow.int64)]) -> tp.Numpy:
        return pair[0] * 2

    flow.train.CheckPoint().init()
    yield fuzz_train, fuzz_pair
    flow.clear_default_session()


def _variables():
    return flow.get_all_variables()


@FUZZ
@given(x=values_for((4, 3)), y=values_for((4,)))
def test_train_call_boundary(jobs, x, y):
    fuzz_train, _ = jobs
    before = _variables()
    try:
        loss = fuzz_train(x, y)
    except (TypeError, ValueError):
        after = _variables()
        assert all(np.array_equal(after[n], before[n]) for n in before), "refused but changed"
        return
    assert isinstance(loss, np.ndarray) and loss.shape == (4,)
    after = _variables()
    assert all(np.isfinite(v).all() for n, v in after.items()), "a call poisoned the model"


@FUZZ
@given(pair=st.one_of(st.tuples(values_for((2,)), values_for((3,))),
                      st.lists(values_for((2,)), max_size=3), values_for((2,))))
def test_tuple_call_boundary(jobs, pair):
    _, fuzz_pair = jobs
    try:
        out = fuzz_pair(pair)
    except (TypeError, ValueError):
        return
    assert out.shape == (2,) and out.dtype == np.float32


# ------------------------------------------------------------------ checkpoint reader
SAVED = {"fz-weight": np.arange(6, dtype=np.float32).reshape(2, 3) / 7,
         "fz-bias": np.array([0.5, -0.25], np.float32),
         "step": np.array(12, np.int64)}
FILES = ["out", "meta", "sha256sum"]


@st.composite
def corruptions(draw):
    name = draw(st.sampled_from(sorted(SAVED)))
    target = draw(st.sampled_from(FILES + ["snapshot_done"]))
    kind = draw(st.sampled_from(["truncate", "flip", "append", "delete"]))
    where = draw(st.floats(0, 1))
    mask = draw(st.integers(1, 255))
    extra = draw(st.binary(min_size=1, max_size=8))
    return name, target, kind, where, mask, extra


def _corrupt(root, corruption) -> bool:
    """Apply it; False if it changed nothing (e.g. flipping a byte of an empty file)."""
    name, target, kind, where, mask, extra = corruption
    path = os.path.join(root, target) if target == "snapshot_done" else \
        os.path.join(root, name, target)
    with open(path, "rb") as f:
        before = f.read()
    data = bytearray(before)
    if kind == "delete":
        os.remove(path)
        return True
    if kind == "truncate":
        keep = int(where * len(data))
        if keep >= len(data):   # nothing cut (an empty file, or where == 1.0)
            return False
        data = data[:keep]
    elif kind == "flip":
        if not data:
            return False
        data[min(int(where * len(data)), len(data) - 1)] ^= mask
    else:
        data += extra
    with open(path, "wb") as f:
        f.write(bytes(data))
    return not (target == "sha256sum" and _same_sums(before, bytes(data)))


def _same_sums(before: bytes, after: bytes) -> bool:
    """Whether a changed checksum file still says the same (a cut final newline, a newline
    flipped into another line break): no corruption to notice."""
    try:
        return parse_sums(after.decode("ascii")) == parse_sums(before.decode("ascii"))
    except (CheckpointError, UnicodeDecodeError):
        return False


def _read(root):
    with warnings.catch_warnings():
        # a missing snapshot_done only warns: a documented, loadable state
        warnings.simplefilter("ignore", flow.checkpoint.io.CheckpointWarning)
        return read_arrays(root)


@FUZZ
@given(corruption=corruptions(), checksums=st.booleans())
# found by the fuzzer: cutting only the final newline of a checksum file changes nothing
@example(corruption=("fz-bias", "sha256sum", "truncate", 0.996, 1, b"x"), checksums=True)
def test_checkpoint_reader_under_corruption(corruption, checksums):
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "ckpt")
        save_arrays(root, SAVED)
        if not checksums:   # as OneFlow wrote it
            for name in SAVED:
                os.remove(os.path.join(root, name, "sha256sum"))
            if corruption[1] == "sha256sum":
                return
        changed = _corrupt(root, corruption)
        try:
            back = _read(root)
        except CheckpointError:
            assert changed or not checksums
            return
        assert set(back) <= set(SAVED)
        name, target, kind = corruption[:3]
        touched_data = target in ("out", "meta") or (target == "sha256sum" and kind != "delete")
        if checksums and changed and touched_data:
            pytest.fail(f"corruption {corruption} went unnoticed")
        if checksums or target != "out":
            for key, value in back.items():
                assert value.dtype == SAVED[key].dtype
                np.testing.assert_array_equal(value, SAVED[key])


@pytest.fixture
def model():
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def fz(x: tp.Numpy.Placeholder((1, 3))) -> tp.Numpy:
        return flow.layers.dense(x, 2, name="fz")

    flow.train.CheckPoint().init()
    yield fz
    flow.clear_default_session()


@FUZZ
@given(corruption=corruptions().filter(lambda c: c[0] != "step"))
def test_a_refused_load_changes_nothing(model, corruption):
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "ckpt")
        save_arrays(root, {k: v for k, v in SAVED.items() if k != "step"})
        flow.load_variables({"fz-weight": np.ones((2, 3), np.float32),
                             "fz-bias": np.ones(2, np.float32)})
        _corrupt(root, corruption)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", flow.checkpoint.io.CheckpointWarning)
            try:
                flow.train.CheckPoint().load(root)
            except CheckpointError:
                after = _variables()
                assert after["fz-weight"].tolist() == [[1, 1, 1]] * 2
                assert after["fz-bias"].tolist() == [1, 1]
                return
        after = _variables()
        for key in ("fz-weight", "fz-bias"):
            np.testing.assert_array_equal(after[key], SAVED[key])
        shutil.rmtree(root, ignore_errors=True)
