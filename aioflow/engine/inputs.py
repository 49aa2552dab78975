"""Validating and converting the numpy arguments of a job call, at the call site.

Errors name the parameter and show what was expected and what was received; nothing
is changed by a refused call. Values that a narrowing conversion would change (int64
beyond int32, float64 beyond float32's range) are refused; so are NaN and infinity in the
float inputs of a train job (``finite=True``; ``flow.config.check_finite_inputs``), which
would poison every weight the step updates. Arrays of another byte order or layout are
converted. When the step may run after the call returns (Callback,
await and legacy forms), each accepted array is copied, so the step computes on the
arguments as they were at the call; a blocking call needs no copy (the caller waits).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .dynamic_inputs import fits_dynamic, is_dynamic_spec
from .._core.describe import describe
from .annotations import PlaceholderSpec
from ..distributed import views
from ..distributed.devices import one as one_device

_ONE = one_device()

# Conversions done silently: the same kind of number, narrower (Python's and numpy's
# defaults are 64-bit; the placeholders usually say 32).
_ALLOWED_CASTS = {(np.dtype("float64"), np.dtype("float32")),
                  (np.dtype("int64"), np.dtype("int32"))}


def convert_argument(spec, value, name: str, fn_name: str, private: bool = True,
                     finite: bool = False, devices=None) -> list[list[np.ndarray]]:
    """The arrays a parameter contributes to a step, for each device of this process
    (``devices``, a ``JobDevices``; one device where None): per device, a list (a Tuple
    parameter gives several). ``finite``: refuse NaN and infinity in float arrays (a train
    job's inputs)."""
    devices = devices or _ONE
    if isinstance(spec, tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(spec):
            raise TypeError(f"{fn_name}() argument {name!r}: expected a tuple of "
                            f"{len(spec)} arrays, got {describe(value)}")
        per_device = [[] for _ in range(devices.count)]
        for i, (s, v) in enumerate(zip(spec, value)):
            parts = convert_argument(s, v, f"{name}[{i}]", fn_name, private, finite, devices)
            for arrays, part in zip(per_device, parts):
                arrays += part
        return per_device
    if spec.kind == "numpy":
        # the whole value for each device, or each device's slice of the batch
        whole = _convert_array(spec, value, name, fn_name, private, finite)
        if devices.world == 1:
            return [[whole]]
        return [[part] for part in views.device_parts(spec, whole, devices)]
    # The outer list holds one entry per device of the world.
    return [[_convert_item(spec, item, name, fn_name, private, finite)]
            for item in views.device_elements(value, spec, name, fn_name, devices)]


def _convert_item(spec, item, name, fn_name, private, finite) -> np.ndarray:
    """One device's array of a mirrored argument."""
    if spec.kind == "list_list_numpy" and _is_tensor_list(spec, item):
        return _convert_tensor_list(spec, item, name, fn_name, finite)
    depth = 0 if spec.kind == "list_numpy" else 1
    for level in range(depth):
        if not isinstance(item, (list, tuple)) or len(item) != 1:
            raise TypeError(
                f"{fn_name}() argument {name!r}: {spec.kind} placeholder expects a list "
                f"of lists, each holding one device's array (or its tensor list), got a "
                f"list of {describe(item)}")
        item = item[0]
    return _convert_array(spec, item, name, fn_name, private, finite)


def _is_tensor_list(spec: PlaceholderSpec, item) -> bool:
    """A device's list of arrays that is not one dense array of the static shape."""
    return (isinstance(item, (list, tuple)) and all(isinstance(a, np.ndarray) for a in item)
            and not (len(item) == 1 and item[0].shape == spec.shape))


def _convert_tensor_list(spec: PlaceholderSpec, arrays, name, fn_name, finite) -> np.ndarray:
    """OneFlow's tensor list: arrays of ``spec``'s number of axes, each within the static
    shape, their leading dimensions adding up to at most the static one. The value is an
    object array of private copies (ops/tensor_buffer.py)."""
    what = f"{fn_name}() argument {name!r}"
    static = spec.shape
    for i, array in enumerate(arrays):
        if array.ndim != len(static) or any(d > m for d, m in zip(array.shape, static)):
            raise ValueError(f"{what}: item {i} of the tensor list has shape {array.shape}; "
                             f"each must have {len(static)} axes within the static shape "
                             f"{static}")
    total = sum(array.shape[0] for array in arrays)
    if static and total > static[0]:
        raise ValueError(f"{what}: the tensor list's leading dimensions add up to {total}, "
                         f"more than the static {static[0]}")
    out = np.empty(len(arrays), dtype=object)
    for i, array in enumerate(arrays):
        own = dataclasses.replace(spec, shape=array.shape)   # the dtype rules of any array
        out[i] = _convert_array(own, array, f"{name}[{i}]", fn_name, True, finite)
    return out


def _convert_array(spec: PlaceholderSpec, value, name, fn_name, private, finite
                   ) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{fn_name}() argument {name!r}: expected {spec.describe()} "
                        f"(numpy.ndarray), got {describe(value)}")
    want = spec.dtype.numpy
    what = f"{fn_name}() argument {name!r}"
    if value.shape != spec.shape:
        if is_dynamic_spec(spec):
            # OneFlow's mirrored placeholders are dynamic: smaller arrays are taken too
            if not fits_dynamic(spec, value.shape):
                raise ValueError(
                    f"{what}: expected {spec.describe()} or smaller (a mirrored "
                    f"placeholder takes {len(spec.shape)} axes and at most "
                    f"{int(np.prod(spec.shape))} elements), got {value.dtype} array of shape "
                    f"{value.shape}")
        else:
            raise ValueError(f"{what}: expected {spec.describe()}, got "
                             f"{value.dtype} array of shape {value.shape}")
    # The same type in the other byte order converts exactly (e.g. '>f4' from a file).
    native = value.dtype.newbyteorder("=") if value.dtype.byteorder not in "=|" else value.dtype
    if native != want:
        if (native, want) not in _ALLOWED_CASTS:
            raise TypeError(f"{what}: expected {spec.describe()}, got "
                            f"{value.dtype} array of shape {value.shape} (only float64->float32 "
                            "and int64->int32 are converted automatically)")
        require_fits(value, want, what)
    if finite and want.kind == "f":
        require_finite(value, what)
    if value.dtype != want:
        with np.errstate(over="ignore"):   # refused above where it mattered
            return np.asarray(value.astype(want, order="C"))
    if private:  # the step may run after the caller reused its buffer
        # (``private`` may be the device's copier: straight into a staging buffer)
        return private(value) if callable(private) else np.array(value, order="C", copy=True)
    return value if value.flags.c_contiguous else np.ascontiguousarray(value)


def require_fits(value: np.ndarray, dtype: np.dtype, what: str) -> None:
    """Refuse a narrowing conversion that would change values: integers that would wrap,
    finite floats beyond ``dtype``'s range (which would become infinity). ValueError
    naming ``what``. NaN and infinity convert to themselves: not refused here.

    >>> require_fits(np.array([1.0, 3e38]), np.dtype(np.float32), "x")
    >>> require_fits(np.array([1.0, -1e39]), np.dtype(np.float32), "x")
    Traceback (most recent call last):
    ...
    ValueError: x: -1e+39 at index (1,) does not fit in float32 (largest magnitude 3.4028235e+38)
    """
    if not value.size:
        return
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        low, high = value.min(), value.max()
        if low < info.min or high > info.max:
            raise ValueError(f"{what}: values from {low} to {high} do not fit in {dtype}")
    elif dtype.kind == "f" and value.dtype.kind == "f" and value.dtype.itemsize > dtype.itemsize:
        limit = np.finfo(dtype).max
        # Not ``> limit``: values a hair above it round down to it, and fit.
        too_big = np.abs(value) > _largest_rounding_to(dtype)
        if too_big.any():
            index = tuple(int(i) for i in np.unravel_index(np.argmax(too_big), value.shape))
            raise ValueError(f"{what}: {value[index].item()!r} at index {index} does not fit "
                             f"in {dtype} (largest magnitude {str(limit)})")


def _largest_rounding_to(dtype: np.dtype) -> float:
    """The largest float64 that ``astype(dtype)`` rounds to a finite value."""
    top = np.finfo(dtype).max
    limit = np.float64(top)
    # The spacing of floats just below max (the same binade as max). Halfway past max
    # rounds to infinity (ties to even: max's last bit is 1); anything below stays finite.
    step = limit - np.float64(np.nextafter(top, dtype.type(0)))
    return float(np.nextafter(limit + step / 2, -np.inf))


def require_finite(value: np.ndarray, what: str) -> None:
    """Refuse NaN and infinity: ValueError naming ``what``, the first bad index and the
    switch that turns the check off.

    >>> require_finite(np.array([[0.0, 1.0], [np.nan, np.inf]]), "x")
    Traceback (most recent call last):
    ...
    ValueError: x: nan at index (1, 0) (the first of 2 non-finite values): NaN or infinity in a train job's input would make every weight it updates NaN; flow.config.check_finite_inputs(False) turns this check off
    """
    if value.dtype.kind != "f" or not value.size:
        return
    finite = np.isfinite(value)
    if not finite.all():
        bad = ~finite
        index = tuple(int(i) for i in np.unravel_index(np.argmax(bad), value.shape))
        raise ValueError(
            f"{what}: {value[index].item()!r} at index {index} (the first of "
            f"{int(np.count_nonzero(bad))} non-finite values): NaN or infinity in a train "
            "job's input would make every weight it updates NaN; "
            "flow.config.check_finite_inputs(False) turns this check off")
