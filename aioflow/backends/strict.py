"""The strict test backend: numpy underneath, CuPy's manners at the host boundary.

Its arrays (:class:`StrictArray`) wrap numpy arrays and refuse what a GPU array refuses or
should never be asked for inside a step:

* ``numpy.asarray(a)`` / ``numpy.array(a)`` raise ``TypeError``, as CuPy's do;
* ``float(a)``, ``int(a)``, ``bool(a)``, ``a.item()``, ``a.tolist()`` raise
  :class:`HostSyncError`: on a GPU each would stall the step until the device caught up.

Everything else numpy offers works, through ``xp`` (:data:`xp`, a stand-in for the
``numpy`` module whose functions take and return strict arrays) or through numpy's own
functions (``__array_function__``/``__array_ufunc__``, as CuPy's arrays accept them).
Reductions return 0-d arrays, never numpy scalars, again as CuPy does. Values cross the
boundary only through the backend (``to_device``, ``to_host``), so the test suite runs on
this backend the code paths the GPU runs, on a machine without one; compiling for it picks
the generic (``xp``) kernels, as for CuPy, and none of the CPU-only ones.

>>> backend = StrictBackend()
>>> a = backend.to_device(np.arange(4.0))
>>> float((a * 2).sum())
Traceback (most recent call last):
...
aioflow.backends.strict.HostSyncError: float() of a device array: reading a device value on the host inside a step stalls it (strict backend)
>>> backend.to_host((a * 2).sum()).tolist()
12.0
"""
from __future__ import annotations

import types

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from .device import Fetched, Launched, Staged
from .base import Backend


class HostSyncError(TypeError):
    """A device value was read on the host (``float(a)``, ``a.item()``, ...)."""


def _wrap(value):
    if isinstance(value, np.ndarray):
        return StrictArray(value)
    if isinstance(value, np.generic):
        return StrictArray(np.asarray(value))
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def _unwrap(value):
    if isinstance(value, StrictArray):
        return value._array
    if isinstance(value, tuple):
        return tuple(_unwrap(v) for v in value)
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value


def _call(fn, args, kwargs):
    result = fn(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()})
    out = kwargs.get("out")
    if out is not None:   # hand back the very ``out`` given, as numpy and CuPy do
        outs = out if isinstance(out, tuple) else (out,)
        for given in outs:
            if isinstance(given, StrictArray) and given._array is result:
                return given
        if isinstance(result, tuple) and len(result) == len(outs):
            return tuple(g if isinstance(g, StrictArray) and g._array is r else _wrap(r)
                         for g, r in zip(outs, result))
    return _wrap(result)


def _host_arrays_in(args, kwargs, min_ndim: int = 0) -> bool:
    """Whether numpy arrays of at least ``min_ndim`` dimensions are among the arguments
    (or inside a tuple or list argument)."""
    for value in (*args, *kwargs.values()):
        values = value if isinstance(value, (tuple, list)) else (value,)
        if any(isinstance(v, np.ndarray) and v.ndim >= min_ndim for v in values):
            return True
    return False


def _refuse_host_arrays(name, args, kwargs) -> None:
    """CuPy refuses numpy arrays mixed with its own in one operation; so does this."""
    if _host_arrays_in(args, kwargs):
        raise TypeError(f"{name}: a numpy array mixed with device arrays (strict "
                        "backend, as CuPy): move it with xp.asarray first")


def _refuse(what):
    def refuse(self, *args, **kwargs):
        raise HostSyncError(f"{what} of a device array: reading a device value on the host "
                            "inside a step stalls it (strict backend)")
    return refuse


class StrictArray(NDArrayOperatorsMixin):
    """A numpy array that behaves like a CuPy array at the host boundary."""

    __slots__ = ("_array",)

    def __init__(self, array: np.ndarray):
        self._array = array

    # -- the host boundary -------------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed (strict "
                        "backend, as CuPy): use the backend's to_host()")

    __float__ = _refuse("float()")
    __int__ = _refuse("int()")
    __index__ = _refuse("int()")
    __complex__ = _refuse("complex()")
    __bool__ = _refuse("bool()")
    item = _refuse(".item()")
    tolist = _refuse(".tolist()")

    # -- numpy's protocols -------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        _refuse_host_arrays(ufunc.__name__, inputs, kwargs)
        return _call(getattr(ufunc, method), inputs, kwargs)

    def __array_function__(self, func, types_, args, kwargs):
        _refuse_host_arrays(func.__name__, args, kwargs)
        return _call(func, args, kwargs)

    def __array_namespace__(self, api_version=None):
        return xp

    # -- the ndarray surface -----------------------------------------------------------
    shape = property(lambda self: self._array.shape)
    dtype = property(lambda self: self._array.dtype)
    ndim = property(lambda self: self._array.ndim)
    size = property(lambda self: self._array.size)
    strides = property(lambda self: self._array.strides)
    itemsize = property(lambda self: self._array.itemsize)
    nbytes = property(lambda self: self._array.nbytes)
    flags = property(lambda self: self._array.flags)
    T = property(lambda self: StrictArray(self._array.T))

    def __getattr__(self, name):
        attr = getattr(self._array, name)
        if callable(attr):
            return lambda *args, **kwargs: _call(attr, args, kwargs)
        return _wrap(attr)

    def __getitem__(self, key):
        return _wrap(self._array[_unwrap(key)])

    def __setitem__(self, key, value):
        self._array[_unwrap(key)] = _unwrap(value)

    def __len__(self):
        return len(self._array)

    def __iter__(self):
        return (_wrap(row) for row in self._array)

    def __copy__(self):
        return StrictArray(self._array.copy())

    def __repr__(self) -> str:
        return f"StrictArray({self._array!r})"


class _Namespace(types.SimpleNamespace):
    """numpy (or one of its submodules, or a Generator) with strict arrays in and out."""

    def __init__(self, target):
        super().__init__()
        object.__setattr__(self, "_target", target)

    def __getattr__(self, name):
        if name == "ndarray":
            return StrictArray
        attr = getattr(self._target, name)
        if isinstance(attr, types.ModuleType):
            return _Namespace(attr)
        if isinstance(attr, np.ufunc):
            return _Ufunc(attr)
        if callable(attr) and not isinstance(attr, type):
            if name in _TRANSFERS:
                return lambda *args, **kwargs: _call(attr, _numeric_only(name, args), kwargs)
            return lambda *args, **kwargs: _call_device_only(attr, name, args, kwargs)
        return attr

    def __repr__(self) -> str:
        return f"<strict {self._target!r}>"


_TRANSFERS = {"asarray", "array"}   # the module functions CuPy lets take a numpy array


def _numeric_only(name, args):
    """As CuPy's ``array``/``asarray``: an object array (a tensor buffer) is refused, with
    CuPy's message; host values must not become device arrays."""
    first = _unwrap(args[0]) if args else None
    if isinstance(first, np.ndarray) and first.dtype == object:
        raise ValueError(f"Unsupported dtype object (strict backend's xp.{name}, as CuPy's)")
    return args


def _call_device_only(fn, name, args, kwargs):
    """As CuPy's functions: numpy arrays (but 0-d ones, taken as scalars) are refused."""
    if _host_arrays_in(args, kwargs, min_ndim=1):
        raise TypeError(f"xp.{name}: a non-scalar numpy array given to a device function "
                        "(strict backend, as CuPy): move it with xp.asarray first")
    return _call(fn, args, kwargs)


class _Ufunc:
    def __init__(self, ufunc):
        self._ufunc = ufunc

    def __call__(self, *args, **kwargs):
        return _call(self._ufunc, args, kwargs)

    def __getattr__(self, name):
        attr = getattr(self._ufunc, name)
        if callable(attr):
            return lambda *args, **kwargs: _call(attr, args, kwargs)
        return attr


xp = _Namespace(np)   # the array module kernels see on the strict backend


class StrictDevice:
    """Copies at the boundary, work at once (numpy), strict arrays in between."""

    name = "strict"
    xp = xp

    def stage(self, host_arrays) -> Staged:
        # A tensor buffer (an object array) stays on the host, as the CuPy device keeps it.
        return Staged([np.array(a, copy=True) if a.dtype == object
                       else StrictArray(np.array(a, copy=True)) for a in host_arrays])

    def launch(self, fn, staged: Staged) -> Launched:
        return Launched(fn(staged.arrays))

    def fetch(self, launched: Launched) -> Fetched:
        return Fetched([_host_copy(a) for a in launched.outputs])


def _host_copy(array) -> np.ndarray:
    if isinstance(array, StrictArray):
        return array._array.copy()
    if isinstance(array, np.ndarray):   # host-resident state (step counters)
        return array.copy()
    raise TypeError(f"strict backend: expected a device array, got {type(array).__name__}")


class StrictBackend(Backend):
    """The strict test backend (see the module docstring)."""

    name = "strict"
    device_tag = "gpu"
    fuses_launches = True
    xp = xp

    def __init__(self):
        self.device = StrictDevice()

    def to_device(self, host_array):
        return StrictArray(np.array(host_array, copy=True))

    def to_host(self, array) -> np.ndarray:
        return _host_copy(array)

    def assign(self, target, host_array) -> None:
        target._array[...] = host_array

    def owns(self, array) -> bool:
        return isinstance(array, StrictArray)

    def random_generator(self, seed):
        return _Namespace(np.random.default_rng(seed))
