"""``categorical_ordinal_encode``: values to ordinals 1, 2, 3... in order of first
appearance, through a hash table kept in variables across steps.

The table is OneFlow's: ``capacity`` slots of (key, ordinal) pairs in one flat array of
``2 * capacity``, open addressing from slot ``key % capacity`` with linear probing, key 0
marking an empty slot (so the value 0 always encodes to 0); ``size`` counts the ordinals
handed out. The op is pure: it returns the codes and the new table and size, which the
caller assigns back to the variables (aioflow's update ops run after the step's reads).

Probing is sequential by nature, so the kernel runs on the host (through the backend's
copies on a GPU); only the values new to the table walk the probe loop in Python.
"""
from __future__ import annotations

import numpy as np

from .registry import register
from .scatter import require_indices


def _infer_encode(values, table, size):
    require_indices("categorical_ordinal_encode", values, "input_tensor")
    if table.dtype is not values.dtype or size.dtype is not values.dtype:
        raise TypeError("categorical_ordinal_encode: table and size must have the input's "
                        f"dtype {values.dtype.name}, got {table.dtype.name} and "
                        f"{size.dtype.name}")
    if table.ndim != 1 or table.shape[0] % 2 or size.shape != (1,):
        raise ValueError("categorical_ordinal_encode: table must be 1-d of even length "
                         f"(2 * capacity) and size of shape (1,), got {table.shape} and "
                         f"{size.shape}")
    return [(values.shape, values.dtype), (table.shape, table.dtype), ((1,), size.dtype)]


def _host(ctx, array):
    return array.copy() if isinstance(array, np.ndarray) else ctx.backend.to_host(array)


def _insert(table, size, key, capacity):
    """The ordinal of ``key`` (inserting it if new); raises when the table is full."""
    for probe in range(capacity):
        # C's size_t arithmetic: a negative key wraps around 2**64 before the modulo.
        slot = 2 * (((int(key) + probe) % 2 ** 64) % capacity)
        if table[slot] == key:
            return table[slot + 1]
        if table[slot] == 0:
            size[0] += 1
            table[slot], table[slot + 1] = key, size[0]
            return size[0]
    raise RuntimeError(f"categorical_ordinal_encode: the table is full (capacity "
                       f"{capacity}); give the encoder a larger capacity")


@register("categorical_ordinal_encode", infer=_infer_encode, differentiable=False)
def categorical_ordinal_encode_op(ctx, values, table, size):
    host_values, host_table, host_size = _host(ctx, values), _host(ctx, table), _host(ctx, size)
    capacity = host_table.shape[0] // 2
    # Unique values in order of first appearance: ordinals follow the input's order.
    uniques, first = np.unique(host_values.reshape(-1), return_index=True)
    codes = {}
    for key in uniques[np.argsort(first, kind="stable")]:
        codes[key] = _insert(host_table, host_size, key, capacity)
    keys = np.fromiter(codes, dtype=host_values.dtype, count=len(codes))
    ordinals = np.fromiter(codes.values(), dtype=host_values.dtype, count=len(codes))
    out = _lookup(keys, ordinals, host_values)
    xp = ctx.xp
    return xp.asarray(out), xp.asarray(host_table), xp.asarray(host_size)


def _lookup(keys, ordinals, values):
    order = np.argsort(keys)
    return ordinals[order][np.searchsorted(keys[order], values)].astype(values.dtype)


__all__ = ["categorical_ordinal_encode_op"]
