"""``flow.categorical_ordinal_encode`` and ``flow.layers.categorical_ordinal_encoder``:
categorical values (already hashed to integers) to ordinals 1, 2, 3... in order of first
appearance, remembered across steps in a hash table kept in variables (0 encodes to 0).

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> flow.clear_default_session()
>>> @flow.global_function(type="predict")
... def encode(x: tp.Numpy.Placeholder((3, 3), dtype=flow.int32)) -> tp.Numpy:
...     return flow.layers.categorical_ordinal_encoder(x, 16)
>>> encode(np.array([[7, 0, 2], [1, 7, 2], [0, 1, 7]], np.int32)).tolist()
[[1, 0, 2], [3, 1, 2], [0, 3, 1]]
"""
from __future__ import annotations

import numbers

from ..engine.variables import get_variable
from ..initializers import zeros_initializer
from ..ops import ordinal_encode as _enc
from .assign_api import assign, variable_name
from .ops_api import _require_blob

__all__ = ["categorical_ordinal_encode", "categorical_ordinal_encoder"]


def categorical_ordinal_encode(table, size, input_tensor, hash_precomputed=True, name=None):
    """The ordinals of ``input_tensor``'s values through the hash table ``table``
    (a variable of shape ``(2 * capacity,)``) and its count ``size`` (a variable of shape
    (1,)), both of the input's integer dtype; new values are added to them at the end of
    the step. Only ``hash_precomputed=True`` exists (in OneFlow too)."""
    if hash_precomputed is not True:
        raise NotImplementedError("categorical_ordinal_encode: only hash_precomputed=True "
                                  "is supported (as in OneFlow)")
    for value, arg in ((table, "table"), (size, "size")):
        variable_name(value, f"categorical_ordinal_encode ({arg})")
    _require_blob(input_tensor, "categorical_ordinal_encode", "input_tensor")
    codes, new_table, new_size = _enc.categorical_ordinal_encode_op(
        input_tensor, table, size, name=name)
    assign(table, new_table)
    assign(size, new_size)
    return codes


def categorical_ordinal_encoder(input_tensor, capacity, hash_precomputed=True,
                                name="CategoricalOrdinalEncoder"):
    """:func:`categorical_ordinal_encode` with its own table of ``capacity`` entries, in
    the variables ``<name>-Table`` and ``<name>-Size``."""
    if isinstance(capacity, bool) or not isinstance(capacity, numbers.Integral) \
            or capacity <= 0:
        raise ValueError(f"categorical_ordinal_encoder: capacity must be a positive int, "
                         f"got {capacity!r}")
    _require_blob(input_tensor, "categorical_ordinal_encoder", "input_tensor")
    dtype = input_tensor.dtype
    table = get_variable(f"{name}-Table", shape=(2 * int(capacity),), dtype=dtype,
                         initializer=zeros_initializer(), trainable=False)
    size = get_variable(f"{name}-Size", shape=(1,), dtype=dtype,
                        initializer=zeros_initializer(), trainable=False)
    return categorical_ordinal_encode(table, size, input_tensor, hash_precomputed,
                                      name=f"{name}-Encode")
