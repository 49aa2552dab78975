"""``flow.experimental``: OneFlow v0.3.4's experimental ops that its lazy-mode op tests use.

Their results have a data-dependent length: every output keeps the input's static
length, the first ``num_unique`` entries valid and the rest zeros, as in OneFlow.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def uniques(x: tp.Numpy.Placeholder((5,), dtype=flow.int32)
...             ) -> tuple[tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy]:
...     return flow.experimental.unique_with_counts(x)
>>> y, idx, count, n = uniques(np.array([7, 3, 7, 7, 1], np.int32))
>>> y.tolist(), idx.tolist(), count.tolist(), n.tolist()
([7, 3, 1, 0, 0], [0, 1, 0, 0, 2], [3, 1, 1, 0, 0], [3])
"""
from __future__ import annotations

from ._core import dtypes
from .oneflow_ops.experimental_api import (logical_slice as logical_slice,
                                           logical_slice_assign as logical_slice_assign,
                                           square_sum as square_sum)
from .checkpoint.interface import (get_interface_blob_value as get_interface_blob_value,
                                   set_interface_blob_value as set_interface_blob_value)
from .engine.modes import enable_typing_check as enable_typing_check
from .oneflow_ops.ops_api import _require_blob
from .scope import name_scope as name_scope
from .oneflow_ops.ssp_api import scope as scope, ssp_variable_proxy as ssp_variable_proxy
from .ops import unique as _unique

__all__ = ["unique_with_counts", "indexed_slices_reduce_sum", "ssp_variable_proxy", "scope",
           "square_sum", "logical_slice", "logical_slice_assign", "get_interface_blob_value",
           "set_interface_blob_value", "enable_typing_check", "name_scope"]


def unique_with_counts(x, out_idx=dtypes.int32, name=None):
    """``(y, idx, count, num_unique)`` of the 1-d ``x``: its distinct values ``y`` (in
    order of first appearance), ``idx`` with ``y[idx] == x``, each value's ``count``,
    and how many there are (shape (1,)); ``idx``, ``count`` and ``num_unique`` have the
    integer dtype ``out_idx``."""
    _require_blob(x, "unique_with_counts", "x")
    return tuple(_unique.unique_with_counts_op(x, out_idx=dtypes.convert(out_idx), name=name))


def indexed_slices_reduce_sum(indices, values, name=None):
    """``(y_indices, y_values, num_unique)``: the distinct ``indices`` (flattened, in order
    of first appearance) and, for each, the sum of its slices of ``values`` (the slice of
    ``values`` after the index axes, flattened: ``y_values`` has shape ``(n, width)``);
    ``num_unique`` is int64 of shape (1,)."""
    _require_blob(indices, "indexed_slices_reduce_sum", "indices")
    _require_blob(values, "indexed_slices_reduce_sum", "values")
    return tuple(_unique.indexed_slices_reduce_sum_op(indices, values, name=name))
