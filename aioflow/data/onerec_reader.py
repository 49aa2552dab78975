"""``flow.data.onerec_reader`` and ``flow.data.OneRecDecoder``: OneFlow's OneRec data sets
(``aioflow.data.onerec`` writes them) read inside a job, one batch per step.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> from typing import Tuple
>>> from aioflow.data import onerec
>>> files = onerec.write_onerec("onerec_reader_example", [
...     {"x": np.full(3, i, np.float32), "label": np.int32(i % 2)} for i in range(4)])
>>> @flow.global_function(type="predict")
... def read_job() -> Tuple[tp.Numpy, tp.Numpy]:
...     records = flow.data.onerec_reader(files, batch_size=2)
...     x = flow.data.OneRecDecoder(records, "x", dtype=flow.float, shape=(3,))
...     label = flow.data.onerec_decoder(records, "label", dtype=flow.int32, shape=(1,))
...     return x * 10, label
>>> read_job()[0]
array([[ 0.,  0.,  0.],
       [10., 10., 10.]], dtype=float32)
>>> read_job()[1].tolist(), read_job()[1].tolist()   # the stream goes on, and starts over
([[0], [1]], [[0], [1]])
"""
from __future__ import annotations

import functools
import os

import numpy as np

from .._core import dtypes
from ..engine.dynamic_shapes import mark
from ..ir import current_graph
from . import onerec
from .ofrecord_stream import ReaderBatch, RecordStream
from .onerec_decode import LIST_OF_DTYPE, FieldDecoder

__all__ = ["onerec_reader", "OneRecDecoder", "onerec_decoder", "OneRecBatch"]

_SHUFFLE_MODES = ("instance", "batch")


class OneRecBatch(ReaderBatch):
    """What ``onerec_reader`` returns inside a job: each step, ``batch_size`` examples of
    the data set. Not a blob: give it to ``OneRecDecoder``, which returns blobs."""

    reader = "flow.data.onerec_reader"
    dtype = dtypes.tensor_buffer   # as OneFlow's reader blob: one example's bytes per element


def onerec_reader(files, batch_size: int = 1, random_shuffle: bool = False,
                  shuffle_mode: str = "instance", shuffle_buffer_size: int = 1024,
                  shuffle_after_epoch: bool = False, verify_example: bool = True,
                  name: str | None = None, *, seed: int | None = None) -> OneRecBatch:
    """The examples of the OneRec files ``files`` (a list of paths), ``batch_size`` per
    step of the job, for ``OneRecDecoder``.

    The files are read in order, endlessly, every frame checked against its XXH64
    digests. ``random_shuffle`` shuffles through a buffer of ``shuffle_buffer_size``:
    examples with ``shuffle_mode="instance"``, whole batches of consecutive examples with
    ``"batch"``; ``shuffle_after_epoch`` reads the files in a new order each epoch, the
    first included (as OneFlow's OneRec reader; its OFRecord reader keeps the first's);
    ``seed`` (aioflow's addition; default from ``flow.random.seed``) makes both
    reproducible. ``verify_example`` checks each payload's ``"1REC"`` identifier; its
    structure is always checked. Reading and decoding run on a background loader thread,
    ahead of the steps. FileNotFoundError names a missing file; a broken frame raises a
    ValueError naming the file and the byte.
    """
    graph = current_graph()
    what = "flow.data.onerec_reader"
    if not isinstance(files, (list, tuple)) or not files or not all(
            isinstance(f, (str, os.PathLike)) and os.fspath(f) for f in files):
        raise TypeError(f"{what}: files must be a non-empty list of OneRec file paths, got "
                        f"{files!r}")
    if shuffle_mode not in _SHUFFLE_MODES:
        raise ValueError(f"{what}: shuffle_mode must be one of {_SHUFFLE_MODES}, got "
                         f"{shuffle_mode!r}")
    parse = functools.partial(onerec.parse_example, verify=bool(verify_example))
    stream = RecordStream([os.fspath(f) for f in files], batch_size, random_shuffle,
                          shuffle_buffer_size, shuffle_after_epoch, seed, what,
                          shuffle_batches=shuffle_mode == "batch", shuffle_first_epoch=True,
                          read=onerec.read_records, parse=parse,
                          hint="check the paths in files")
    return OneRecBatch(graph, stream, name or graph.unique_name("OneRecReader"))


def OneRecDecoder(input_blob: OneRecBatch, key: str, dtype, shape,  # noqa: N802
                  is_dynamic: bool = False, reshape=None, batch_padding=None,
                  name: str | None = None):
    """A blob ``(batch_size, *shape)`` of ``dtype``: the tensor under ``key`` of each
    example of ``input_blob`` (what ``onerec_reader`` returned).

    ``dtype`` is one of int8, int32, int64, float32, float64 and must be the tensor's
    own type (OneRec's Int8List, ..., Float64List): values are copied, not converted.
    Each tensor's shape must have as many axes as ``shape``; ``reshape`` (same number of
    axes, one may be -1) reshapes the values first. ``batch_padding`` (same number of
    axes, all 0 after the first) pads the first axis with zeros: its first entry 0 needs
    equal sizes, -1 pads to the batch's largest, n > 0 to n. With ``is_dynamic`` the
    records may be smaller than ``shape`` along its first axis: the blob keeps ``shape``,
    zeros after the valid part, and a job returning it returns the valid part, as a
    OneFlow job returns a dynamic blob.

    Errors (raised by the job call that meets them) name ``key`` and say what was
    expected and found: a missing key, another list type, a shape that does not fit.
    """
    what = "flow.data.OneRecDecoder"
    if not isinstance(input_blob, OneRecBatch):
        raise TypeError(f"{what}: input_blob must be what flow.data.onerec_reader returned, "
                        f"got {type(input_blob).__name__}")
    if not isinstance(key, str) or not key:
        raise TypeError(f"{what}: key must be a feature name (a non-empty str), got {key!r}")
    dtype = dtypes.convert(dtype)
    if dtype.numpy not in LIST_OF_DTYPE:
        raise TypeError(f"{what}: dtype must be one of int8, int32, int64, float32, float64 "
                        f"(the types of OneRec's lists), got {dtype.name}")
    shape = _dims(what, "shape", shape, lambda d: d > 0, "positive ints")
    if reshape is not None:
        reshape = _dims(what, "reshape", reshape, lambda d: d > 0 or d == -1,
                        "positive ints or one -1", len(shape))
        if reshape.count(-1) > 1:
            raise ValueError(f"{what}: reshape may hold one -1, got {reshape}")
    if batch_padding is not None:
        batch_padding = _dims(what, "batch_padding", batch_padding, lambda d: d >= -1,
                              "ints >= -1", len(shape))
        if any(batch_padding[1:]):
            raise ValueError(f"{what}: batch_padding pads the first axis only: its other "
                             f"entries must be 0, got {batch_padding}")
    field = FieldDecoder(key, dtype.numpy, shape, bool(is_dynamic), reshape, batch_padding,
                         what)
    label = name or key
    source = input_blob.source
    blob = source.add_field(field.decode, (input_blob.batch_size,) + shape, dtype, label)
    if is_dynamic:
        size = source.add_field(field.valid_length, (1,), dtypes.int32, label + "_size")
        mark(blob, size, axis=1)
    return blob


onerec_decoder = OneRecDecoder


def _dims(what: str, argument: str, value, valid, expected: str, axes: int | None = None
          ) -> tuple:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, (tuple, list)) or not value or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) and valid(d)
            for d in value):
        raise ValueError(f"{what}: {argument} must be a non-empty tuple of {expected}, got "
                         f"{value!r}")
    if axes is not None and len(value) != axes:
        raise ValueError(f"{what}: {argument} must have as many axes as shape ({axes}), got "
                         f"{tuple(value)}")
    return tuple(int(d) for d in value)
