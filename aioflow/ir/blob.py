"""Blob: the symbolic value flowing between ops while a job is traced."""
from __future__ import annotations

import numpy as np

from .._core import dtypes
from .distribute import assert_is_valid_distribute
from .blob_facts import is_dynamic
from .blob_facts import batch_axis, parallel_conf


class Blob:
    """A placeholder for a tensor inside a job function: a shape and a dtype, no data.

    Blobs support Python's arithmetic operators, which build ops:

    >>> import aioflow as flow, aioflow.typing as tp
    >>> @flow.global_function(type="predict")
    ... def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
    ...     return (x * 2 + 1) @ flow.transpose(x)
    >>> job(np.ones((2, 3), np.float32)).tolist()
    [[9.0, 9.0], [9.0, 9.0]]
    """

    __slots__ = ("graph", "id", "shape", "dtype", "producer", "index")
    __array_priority__ = 1000  # make numpy defer to Blob's reflected operators

    def __init__(self, graph, blob_id: int, shape, dtype, producer=None, index: int = 0):
        self.graph = graph
        self.id = blob_id
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtypes.from_numpy(dtype)
        self.producer = producer
        self.index = index

    # -- description -------------------------------------------------------------------
    @property
    def name(self) -> str:
        if self.producer is None:
            return self.graph.placeholder_names.get(self.id, f"blob{self.id}")
        suffix = "" if len(self.producer.outputs) == 1 else f":{self.index}"
        return self.producer.name + suffix

    @property
    def logical_blob_name(self) -> str:
        return self.name

    def with_distribute(self, distribute) -> "Blob":
        """OneFlow's layout hint (``flow.distribute.split(axis)``...): checked, and the
        blob itself returned, since aioflow keeps values whole on each device."""
        assert_is_valid_distribute(distribute, "Blob.with_distribute")
        return self

    @property
    def op_name(self) -> str:
        """The name of the op that made this blob (OneFlow's ``blob.op_name``): its
        namespace prefix included."""
        return self.name if self.producer is None else self.producer.name

    @property
    def is_dynamic(self) -> bool:
        """OneFlow's flag: the shape follows a dynamic (mirrored) input, or is
        data-dependent, so a step may see a smaller one (``ir/blob_facts.py``)."""
        return is_dynamic(self)

    @property
    def batch_axis(self) -> int:
        """The axis indexing the batch's samples, or ``flow.INVALID_BATCH_AXIS``."""
        return batch_axis(self)

    @property
    def parallel_conf(self):
        """Where the producing op runs: ``.device_tag()`` is "cpu" or "gpu"."""
        return parallel_conf(self)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __repr__(self) -> str:
        return f"Blob(name={self.name!r}, shape={self.shape}, dtype={self.dtype!r})"

    def __bool__(self):
        raise TypeError(
            "a Blob has no value while the job is traced, so it cannot be used as a Python "
            "bool (in `if` or `and`); use flow.where / comparison ops instead"
        )

    def __iter__(self):
        raise TypeError("a Blob cannot be iterated while the job is traced; index it instead")

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d Blob")
        return self.shape[0]

    __hash__ = object.__hash__

    # -- operators: each builds an op through the function bound for it -------------------
    # ``aioflow.oneflow_ops.math_api`` and ``.ops_api`` bind them when imported
    # (:func:`bind_operators`), so this module needs nothing above ``ir``: no import cycle,
    # and no import per call.
    _operators: dict = {}

    def _op(self, name):
        try:
            return Blob._operators[name]
        except KeyError:
            raise TypeError(f"Blob operator {name!r} is not available: import aioflow "
                            "first") from None

    def __add__(self, other):
        return self._op("add")(self, other)

    def __radd__(self, other):
        return self._op("add")(other, self)

    def __sub__(self, other):
        return self._op("subtract")(self, other)

    def __rsub__(self, other):
        return self._op("subtract")(other, self)

    def __mul__(self, other):
        return self._op("multiply")(self, other)

    def __rmul__(self, other):
        return self._op("multiply")(other, self)

    def __truediv__(self, other):
        return self._op("divide")(self, other)

    def __rtruediv__(self, other):
        return self._op("divide")(other, self)

    def __mod__(self, other):
        return self._op("mod")(self, other)

    def __rmod__(self, other):
        return self._op("mod")(other, self)

    def __floordiv__(self, other):
        return self._op("floordiv")(self, other)

    def __rfloordiv__(self, other):
        return self._op("floordiv")(other, self)

    def __pow__(self, other):
        return self._op("pow")(self, other)

    def __rpow__(self, other):
        return self._op("pow")(other, self)

    def __matmul__(self, other):
        return self._op("matmul")(self, other)

    def __rmatmul__(self, other):
        return self._op("matmul")(other, self)

    def __neg__(self):
        return self._op("negative")(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return self._op("abs")(self)

    def __eq__(self, other):  # noqa: D105 - elementwise, as in numpy
        return self._op("equal")(self, other)

    def __ne__(self, other):
        return self._op("not_equal")(self, other)

    def __lt__(self, other):
        return self._op("less")(self, other)

    def __le__(self, other):
        return self._op("less_equal")(self, other)

    def __gt__(self, other):
        return self._op("greater")(self, other)

    def __ge__(self, other):
        return self._op("greater_equal")(self, other)

    def __getitem__(self, key):
        return self._op("getitem")(self, key)


def bind_operators(**functions) -> None:
    """Make Blob's Python operators build ops through ``functions`` (by operator name:
    ``add``, ``subtract``, ..., ``matmul``, ``getitem``)."""
    Blob._operators.update(functions)
