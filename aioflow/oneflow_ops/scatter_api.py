"""Scatter, segment and slice-update ops of the ``flow`` and ``flow.math`` namespaces:
``scatter_nd``, ``tensor_scatter_nd_add``/``_update``, ``unsorted_segment_sum`` (and
``_like``, ``unsorted_batch_segment_sum``), ``slice_v2`` and ``slice_update``.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def job(data: tp.Numpy.Placeholder((3, 2)),
...         ids: tp.Numpy.Placeholder((3,), dtype=flow.int32)) -> tp.Numpy:
...     return flow.math.unsorted_segment_sum(data, ids, num_segments=2)
>>> job(np.array([[1, 2], [3, 4], [5, 6]], np.float32), np.array([0, 1, 0], np.int32))
array([[6., 8.],
       [3., 4.]], dtype=float32)
"""
from __future__ import annotations

import builtins
import numbers

import numpy as np

from .._core import dtypes
from ..ops import scatter as _sc
from ..ops.registry import normalize_axis
from ..ops.shape import slice_op
from .dynamic_api import where
from .math_api import add, greater_equal, less, logical_and
from .ops_api import _require_blob, cast, constant, reshape

__all__ = ["scatter_nd", "tensor_scatter_nd_add", "tensor_scatter_nd_update",
           "unsorted_segment_sum", "unsorted_segment_sum_like", "unsorted_batch_segment_sum",
           "slice_v2", "slice_update"]



def scatter_nd(indices, updates, shape, name=None):
    """A Blob of ``shape``, zeros except ``updates`` placed at ``indices`` (shaped
    ``(..., k)``: each row indexes the first k axes); repeated indices add up.

    >>> import numpy as np, aioflow as flow, aioflow.typing as tp
    >>> @flow.global_function(type="predict")
    ... def job(i: tp.Numpy.Placeholder((2, 1), dtype=flow.int32),
    ...         u: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
    ...     return flow.scatter_nd(i, u, shape=(4,))
    >>> job(np.array([[3], [1]], np.int32), np.array([5, 7], np.float32)).tolist()
    [0.0, 7.0, 0.0, 5.0]
    """
    _require_blob(indices, "scatter_nd", "indices")
    _require_blob(updates, "scatter_nd", "updates")
    shape = tuple(int(d) for d in shape)
    return _sc.scatter_nd_op(indices, updates, shape=shape, name=name)


def tensor_scatter_nd_update(params, indices, updates, name=None):
    """``params`` with the slices at ``indices`` replaced by ``updates`` (OneFlow's
    kernel zeroes them, then adds: repeated indices get the sum of their updates)."""
    for value, arg in ((params, "params"), (indices, "indices"), (updates, "updates")):
        _require_blob(value, "tensor_scatter_nd_update", arg)
    return _sc.tensor_scatter_nd_update_op(params, indices, updates, name=name)


def tensor_scatter_nd_add(params, indices, updates, name=None):
    """``params`` with ``updates`` added at ``indices`` (repeated indices add up)."""
    for value, arg in ((params, "params"), (indices, "indices"), (updates, "updates")):
        _require_blob(value, "tensor_scatter_nd_add", arg)
    return _sc.tensor_scatter_nd_add_op(params, indices, updates, name=name)


def _segments(op_name, num_segments):
    if isinstance(num_segments, bool) or not isinstance(num_segments, numbers.Integral) \
            or num_segments <= 0:
        raise ValueError(f"{op_name}: num_segments must be a positive int, got "
                         f"{num_segments!r}")
    return int(num_segments)


def unsorted_segment_sum(data, segment_ids, num_segments, axis=0, name=None):
    """Sums of the slices of ``data`` sharing a segment id: ``segment_ids`` covers
    ``data``'s axes from ``axis`` on, and those axes become one of size ``num_segments``.
    Ids outside ``[0, num_segments)`` are dropped; an empty segment sums to 0."""
    _require_blob(data, "unsorted_segment_sum", "data")
    _require_blob(segment_ids, "unsorted_segment_sum", "segment_ids")
    axis = normalize_axis("unsorted_segment_sum", int(axis), data.ndim)
    return _sc.unsorted_segment_sum_op(
        data, segment_ids, axis=axis,
        num_segments=_segments("unsorted_segment_sum", num_segments), name=name)


def unsorted_segment_sum_like(data, segment_ids, like, axis=0, name=None):
    """:func:`unsorted_segment_sum` with ``num_segments = like.shape[axis]``; the result
    has ``like``'s shape."""
    _require_blob(like, "unsorted_segment_sum_like", "like")
    axis = normalize_axis("unsorted_segment_sum_like", int(axis), like.ndim)
    out = unsorted_segment_sum(data, segment_ids, like.shape[axis], axis=axis, name=name)
    if out.shape != like.shape:
        raise ValueError(f"unsorted_segment_sum_like: the sums have shape {out.shape}, "
                         f"like has {like.shape}")
    return out


def unsorted_batch_segment_sum(data, segment_ids, num_segments, name=None):
    """Per batch entry, :func:`unsorted_segment_sum` along the axis after the batch axes:
    ``segment_ids`` of shape ``(*batch, n)`` and ``data`` of ``(*batch, n, *rest)`` give
    ``(*batch, num_segments, *rest)``."""
    _require_blob(data, "unsorted_batch_segment_sum", "data")
    _require_blob(segment_ids, "unsorted_batch_segment_sum", "segment_ids")
    _sc.require_indices("unsorted_batch_segment_sum", segment_ids, "segment_ids")
    segments = _segments("unsorted_batch_segment_sum", num_segments)
    if segment_ids.ndim < 1 or data.shape[:segment_ids.ndim] != segment_ids.shape:
        raise ValueError(f"unsorted_batch_segment_sum: segment_ids {segment_ids.shape} must "
                         f"be a prefix of data's shape {data.shape}")
    batch = segment_ids.shape[:-1]
    entries = int(np.prod(batch, dtype=np.int64))
    # Segment s of batch entry b becomes segment b * num_segments + s of one flat sum.
    offsets = np.arange(entries, dtype=np.int64).reshape(batch + (1,)) * segments
    ids = cast(segment_ids, dtypes.int64)
    inside = logical_and(greater_equal(ids, 0), less(ids, segments))
    flat_ids = where(inside, add(ids, constant(offsets, dtype=dtypes.int64)),
                     constant(-1, dtype=dtypes.int64))
    rest = data.shape[segment_ids.ndim:]
    sums = _sc.unsorted_segment_sum_op(
        reshape(data, (-1,) + rest), reshape(flat_ids, (-1,)), axis=0,
        num_segments=entries * segments)
    return reshape(sums, batch + (segments,) + rest, name=name)


def _slices(op_name, slice_tup_list, shape):
    """OneFlow's (start, stop, step) triples (missing trailing ones: whole axes) as a
    tuple of Python slices, checked as OneFlow checks them."""
    if not isinstance(slice_tup_list, (list, tuple)) or len(slice_tup_list) > len(shape):
        raise ValueError(f"{op_name}: slice_tup_list must be a list of at most {len(shape)} "
                         f"(start, stop, step) tuples, got {slice_tup_list!r}")
    index = []
    for axis, size in enumerate(shape):
        triple = slice_tup_list[axis] if axis < len(slice_tup_list) else (None, None, None)
        if not isinstance(triple, (list, tuple)) or len(triple) != 3 or not all(
                v is None or isinstance(v, numbers.Integral) for v in triple):
            raise ValueError(f"{op_name}: slice_tup_list[{axis}] must be a (start, stop, "
                             f"step) tuple of ints or None, got {triple!r}")
        start, stop, step = triple
        step = 1 if step is None else int(step)
        if step == 0:
            raise ValueError(f"{op_name}: the step of axis {axis} must not be 0")
        if start is not None and not -size <= start < size:
            raise ValueError(f"{op_name}: start {start} of axis {axis} must lie in "
                             f"[{-size}, {size})")
        if stop is not None and not -size - 1 <= stop <= size:
            raise ValueError(f"{op_name}: stop {stop} of axis {axis} must lie in "
                             f"[{-size - 1}, {size}]")
        index.append(builtins.slice(start, stop, step))
    return tuple(index)


def slice_v2(x, slice_tup_list, name=None):
    """``x`` sliced by one ``(start, stop, step)`` per axis (None: the default; fewer
    triples than axes leave the last axes whole); negative steps walk backwards.

    >>> import numpy as np, aioflow as flow, aioflow.typing as tp
    >>> @flow.global_function(type="predict")
    ... def job(x: tp.Numpy.Placeholder((2, 5))) -> tp.Numpy:
    ...     return flow.slice_v2(x, [(None, None, None), (4, 0, -2)])
    >>> job(np.arange(10, dtype=np.float32).reshape(2, 5)).tolist()
    [[4.0, 2.0], [9.0, 7.0]]
    """
    _require_blob(x, "slice_v2", "x")
    return slice_op(x, index=_slices("slice_v2", slice_tup_list, x.shape), name=name)


def slice_update(x, update, slice_tup_list, name=None):
    """``x`` with the slice ``slice_tup_list`` (as :func:`slice_v2`) replaced by
    ``update``; the gradient flows to ``update`` from the slice and to ``x`` elsewhere."""
    _require_blob(x, "slice_update", "x")
    _require_blob(update, "slice_update", "update")
    index = _slices("slice_update", slice_tup_list, x.shape)
    return _sc.slice_update_op(x, update, index=index, name=name)
