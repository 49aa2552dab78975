"""More of ``flow.math`` (re-exported there): ``lgamma``, the two-stage reductions,
``reduced_shape_elem_cnt``, ``broadcast_to_compatible_with`` and the non-finite counters
(``flow.count_not_finite``, ``flow.multi_count_not_finite``).

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def job(x: tp.Numpy.Placeholder((3,), dtype=flow.float64)) -> tp.Numpy:
...     return flow.math.lgamma(x)
>>> np.round(job(np.array([3.0, 0.5, -0.5])), 5).tolist()
[0.69315, 0.57236, 1.26551]
"""
from __future__ import annotations

import numpy as np

from .._core import dtypes
from ..ops import elementwise as _ew
from ..ops import gamma as _gamma
from ..ops import numerics as _num
from ..ops.registry import normalize_axis
from .math_api import reduce_max, reduce_min
from .ops_api import _require_blob, constant

__all__ = ["lgamma", "two_stage_reduce_max", "two_stage_reduce_min",
           "reduced_shape_elem_cnt", "broadcast_to_compatible_with", "count_not_finite",
           "multi_count_not_finite"]


def lgamma(x, name=None):
    """``log |Gamma(x)|`` elementwise (+inf at 0, -1, -2, ...); its gradient is the
    digamma function."""
    return _gamma.lgamma(x, name=name)


def two_stage_reduce_max(x, axis=None, keepdims=False, name=None):
    """``flow.math.reduce_max``. OneFlow splits it in two stages (per device, then
    across devices) for model-parallel blobs; in one process both stages are one. The
    gradient is shared equally among tied maxima, as OneFlow's."""
    return reduce_max(x, axis=axis, keepdims=keepdims, name=name)


def two_stage_reduce_min(x, axis=None, keepdims=False, name=None):
    """``flow.math.reduce_min`` (see :func:`two_stage_reduce_max`)."""
    return reduce_min(x, axis=axis, keepdims=keepdims, name=name)


def reduced_shape_elem_cnt(input_blob, axis=None, dtype=None, name=None):
    """The product of ``input_blob``'s dimensions over ``axis`` (all of them if None), as
    a constant Blob of shape (1,), int32 unless ``dtype``: shapes are static here, so it
    is known when the job is traced."""
    _require_blob(input_blob, "reduced_shape_elem_cnt", "input_blob")
    if axis is None:
        dims = input_blob.shape
    else:
        if not isinstance(axis, (list, tuple)):
            raise TypeError(f"reduced_shape_elem_cnt: axis must be a list or tuple of ints, "
                            f"got {axis!r}")
        axes = {normalize_axis("reduced_shape_elem_cnt", int(a), input_blob.ndim)
                for a in axis}
        dims = [input_blob.shape[a] for a in sorted(axes)]
    count = int(np.prod(dims, dtype=np.int64))
    return constant(count, dtype=dtype or dtypes.int32, shape=(1,), name=name)


def broadcast_to_compatible_with(x, compatible, name=None):
    """``x`` broadcast to the shape that it and every Blob of ``compatible`` broadcast
    to together (numpy's rules); the gradient sums back to ``x``'s shape."""
    _require_blob(x, "broadcast_to_compatible_with", "x")
    if not isinstance(compatible, (list, tuple)):
        raise TypeError("broadcast_to_compatible_with: compatible must be a list of Blobs, "
                        f"got {type(compatible).__name__}")
    try:
        shape = np.broadcast_shapes(x.shape, *(b.shape for b in compatible))
    except ValueError:
        raise ValueError(f"broadcast_to_compatible_with: shapes {x.shape} and "
                         f"{[b.shape for b in compatible]} do not broadcast together") from None
    if tuple(shape) == x.shape:
        return x
    return _ew.broadcast_to(x, shape=tuple(shape), name=name)


def count_not_finite(x, name=None):
    """The number of NaN and infinite elements of ``x``: int64, shape (1,)."""
    return multi_count_not_finite([x], name=name)


def multi_count_not_finite(x, name=None):
    """The number of NaN and infinite elements over all Blobs of the list ``x``: int64,
    shape (1,)."""
    blobs = list(x) if isinstance(x, (list, tuple)) else [x]
    if not blobs:
        raise ValueError("multi_count_not_finite: x must hold at least one Blob")
    for i, blob in enumerate(blobs):
        _require_blob(blob, "multi_count_not_finite", f"x[{i}]")
    return _num.count_not_finite_op(*blobs, name=name)
