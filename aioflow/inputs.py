"""Validating and converting the numpy arguments of a job call, at the call site.

Errors name the parameter and show what was expected and what was received; nothing
is changed by a refused call. When the step may run after the call returns (Callback,
await and legacy forms), each accepted array is copied, so the step computes on the
arguments as they were at the call; a blocking call needs no copy (the caller waits).
"""
from __future__ import annotations

import numpy as np

from .distributed.views import rank_part
from .typing import PlaceholderSpec

# Conversions done silently: the same kind of number, narrower (Python's and numpy's
# defaults are 64-bit; the placeholders usually say 32).
_ALLOWED_CASTS = {(np.dtype("float64"), np.dtype("float32")),
                  (np.dtype("int64"), np.dtype("int32"))}


def convert_argument(spec, value, name: str, fn_name: str, private: bool = True
                     ) -> list[np.ndarray]:
    """The arrays a parameter contributes to a step (a Tuple parameter gives several)."""
    if isinstance(spec, tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(spec):
            raise TypeError(f"{fn_name}() argument {name!r}: expected a tuple of "
                            f"{len(spec)} arrays, got {_describe(value)}")
        arrays = []
        for i, (s, v) in enumerate(zip(spec, value)):
            arrays += convert_argument(s, v, f"{name}[{i}]", fn_name, private)
        return arrays
    if spec.kind == "numpy":
        # the whole value in a single process, else this rank's slice of the batch
        return [rank_part(spec, _convert_array(spec, value, name, fn_name, private))]
    from .distributed import views
    # The outer list holds one entry per rank (one per device: a rank runs one device).
    item = views.rank_element(value, spec, name, fn_name)
    depth = 0 if spec.kind == "list_numpy" else 1
    for level in range(depth):
        if not isinstance(item, (list, tuple)) or len(item) != 1:
            raise TypeError(
                f"{fn_name}() argument {name!r}: {spec.kind} placeholder expects a list "
                f"of lists with one array per device (1 device per rank), got a list of "
                f"{_describe(item)}")
        item = item[0]
    return [_convert_array(spec, item, name, fn_name, private)]


def _convert_array(spec: PlaceholderSpec, value, name, fn_name, private) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{fn_name}() argument {name!r}: expected {spec.describe()} "
                        f"(numpy.ndarray), got {_describe(value)}")
    want = spec.dtype.numpy
    if value.shape != spec.shape:
        raise ValueError(f"{fn_name}() argument {name!r}: expected {spec.describe()}, got "
                         f"{value.dtype} array of shape {value.shape}")
    if value.dtype != want:
        if (value.dtype, want) not in _ALLOWED_CASTS:
            raise TypeError(f"{fn_name}() argument {name!r}: expected {spec.describe()}, got "
                            f"{value.dtype} array of shape {value.shape} (only float64->float32 "
                            "and int64->int32 are converted automatically)")
        require_fits(value, want, f"{fn_name}() argument {name!r}")
        return value.astype(want)
    if private:  # the step may run after the caller reused its buffer
        # (``private`` may be the device's copier: straight into a staging buffer)
        return private(value) if callable(private) else np.array(value, order="C", copy=True)
    return value if value.flags.c_contiguous else np.ascontiguousarray(value)


def require_fits(value: np.ndarray, dtype: np.dtype, what: str) -> None:
    """Refuse to narrow integers that would wrap: ValueError naming ``what``."""
    if dtype.kind in "iu" and value.size:
        info = np.iinfo(dtype)
        low, high = value.min(), value.max()
        if low < info.min or high > info.max:
            raise ValueError(f"{what}: values from {low} to {high} do not fit in {dtype}")


def _describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype} array of shape {value.shape}"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__} of length {len(value)}"
    return type(value).__name__
