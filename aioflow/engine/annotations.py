"""The typing vocabulary of job functions, re-exported as ``aioflow.typing``
(``import aioflow.typing as tp``).

Parameters are annotated with placeholders, which fix the shape and dtype of the
numpy data a call must pass; the return annotation says how results come back:

* ``tp.Numpy`` — a ``numpy.ndarray`` (``ListNumpy``: a list with one array per device,
  ``ListListNumpy``: a list of lists of arrays);
* ``Tuple[...]``, ``List[T]``, ``Dict[K, T]`` (from ``typing``) and ``tp.Dict`` nest them;
* ``tp.Bundle[T]`` — any nesting of tuples, lists and dicts whose leaves are ``T``;
* ``tp.Callback[T]`` — the call returns at once; pass it a function taking ``T``;
* ``None`` — the call returns ``None``.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> from typing import Tuple
>>> @flow.global_function(type="predict")
... def stats(x: tp.Numpy.Placeholder((4,))) -> Tuple[tp.Numpy, tp.Numpy]:
...     return flow.math.reduce_sum(x), flow.math.reduce_max(x)
>>> total, biggest = stats(np.arange(4, dtype=np.float32))
>>> float(total[0]), float(biggest[0])
(6.0, 3.0)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._core import dtypes as _dtypes

__all__ = ["Numpy", "ListNumpy", "ListListNumpy", "Dict", "Bundle", "Callback",
           "PlaceholderSpec"]


@dataclass(frozen=True)
class PlaceholderSpec:
    """What a parameter accepts: ``kind`` is "numpy", "list_numpy" or "list_list_numpy"."""

    kind: str
    shape: tuple[int, ...]
    dtype: _dtypes.DType
    batch_axis: int | None = 0

    def describe(self) -> str:
        return f"{self.dtype.name} array of shape {self.shape}"

    def __call__(self, *args, **kwargs):
        # Callable only so that typing.Tuple[...] accepts placeholders on every Python.
        raise TypeError("a Placeholder is an annotation; pass numpy arrays to the job instead")


def _placeholder(kind: str, shape, dtype, batch_axis) -> PlaceholderSpec:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in shape):
        raise TypeError(f"Placeholder: shape must be a tuple of ints, got {shape!r}")
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"Placeholder: shape dimensions must be >= 0, got {shape}")
    if batch_axis is not None and shape and not -len(shape) <= batch_axis < len(shape):
        raise ValueError(f"Placeholder: batch_axis {batch_axis} is out of range for shape "
                         f"{shape}")
    dtype = _dtypes.convert(dtype)
    if not dtype.is_numeric:   # records and tensor buffers are made inside the job
        raise TypeError(f"Placeholder: dtype must be a numeric data type such as flow.float32, "
                        f"got flow.{dtype.name} (records come from flow.data.ofrecord_reader, "
                        "tensor buffers from flow.tensor_to_tensor_buffer inside the job)")
    return PlaceholderSpec(kind, shape, dtype, batch_axis)


class _Leaf:
    """Base of the array result types; also the namespace of their Placeholder factory."""

    kind = "numpy"

    def __init__(self):
        raise TypeError(f"{type(self).__name__} is an annotation, not a value")

    @classmethod
    def Placeholder(cls, shape, dtype=_dtypes.float32, batch_axis=0) -> PlaceholderSpec:  # noqa: N802
        """A parameter annotation: the call must pass data of this shape and dtype."""
        return _placeholder(cls.kind, shape, dtype, batch_axis)


class Numpy(_Leaf):
    """A result delivered as one ``numpy.ndarray``; ``Numpy.Placeholder`` for inputs."""

    kind = "numpy"


class ListNumpy(_Leaf):
    """A list of arrays, one per device (mirrored view)."""

    kind = "list_numpy"


class ListListNumpy(_Leaf):
    """A list (per device) of lists of arrays."""

    kind = "list_list_numpy"


class Dict:
    """A result delivered as a ``dict`` of str or number keys to ``numpy.ndarray``."""

    def __init__(self):
        raise TypeError("tp.Dict is an annotation, not a value")


class _Wrapper:
    """``Callback[T]`` / ``Bundle[T]``: a subscripted annotation holding ``T``."""

    def __init__(self, origin, arg):
        self.origin = origin
        self.arg = arg

    def __repr__(self) -> str:
        return f"{self.origin.__name__}[{getattr(self.arg, '__name__', self.arg)!r}]"

    def __eq__(self, other):
        return isinstance(other, _Wrapper) and (self.origin, self.arg) == (other.origin,
                                                                          other.arg)

    def __hash__(self):
        return hash((self.origin, repr(self.arg)))


class Callback:
    """``-> tp.Callback[T]``: the call returns a registrar; ``job(x)(fn)`` calls ``fn(T)``."""

    def __class_getitem__(cls, arg):
        return _Wrapper(cls, arg)


class Bundle:
    """``-> tp.Bundle[T]``: any nesting of tuple/list/dict of Blobs, each delivered as ``T``."""

    def __class_getitem__(cls, arg):
        # T is checked when a job is decorated, so that the error names the job.
        return _Wrapper(cls, arg)


def is_wrapper(annotation, origin) -> bool:
    return isinstance(annotation, _Wrapper) and annotation.origin is origin
