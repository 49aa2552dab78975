"""``flow.user_op_builder`` and its three siblings: OneFlow's way of building an op by its
type name, inputs, outputs and attributes.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def job(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
...     return (flow.user_op_builder("my_leaky_relu").Op("leaky_relu")
...             .Input("x", [x]).Output("y").Attr("alpha", 0.5)
...             .Build().InferAndTryRun().RemoteBlobList()[0])
>>> job(np.array([-2.0, 0.0, 3.0], np.float32)).tolist()
[-1.0, 0.0, 3.0]

The op types it knows are OneFlow's, with OneFlow's input, output and attribute names
(``aioflow.oneflow_ops.user_op_table.USER_OPS``); each is built from aioflow's own ops, which bring
their gradients. Another op type raises ``NotImplementedError`` naming it: OneFlow's C++
custom ops (``REGISTER_USER_OP``) cannot be registered in aioflow.

``consistent_user_op_builder`` is the same builder (jobs use the consistent view unless
told otherwise); the ``*_module_builder`` forms fix the op type up front and are then
named and given inputs per call (``OpName(...)``, ``Input(...)``), as OneFlow's stateful
op modules; ``InitOpKernel()`` has nothing to set up.
"""
from __future__ import annotations

import warnings

from .._core.callsite import user_stacklevel
from ..ir import Blob, current_graph
from .user_op_table import REQUIRED, USER_OPS

__all__ = ["user_op_builder", "consistent_user_op_builder", "user_op_module_builder",
           "consistent_user_op_module_builder", "UserOpConfBuilder", "UserOp"]


class UserOp:
    """An op described by a builder; :meth:`InferAndTryRun` adds it to the job."""

    def __init__(self, op_name: str, op_type_name: str | None):
        self.op_name = op_name
        self.op_type_name = op_type_name
        self.inputs: dict[str, list] = {}
        self.input_sizes: dict[str, int] = {}
        self.outputs: dict[str, int] = {}   # output name -> count, in Output() order
        self.attrs: dict = {}
        self._results: dict[str, list] | None = None

    def InitOpKernel(self) -> None:  # noqa: N802 - OneFlow's name
        """Nothing to set up: the op's kernels are aioflow's."""

    def InferAndTryRun(self) -> "UserOp":  # noqa: N802
        """Check the description against the op type and build it in the traced job."""
        spec = _spec(self.op_type_name)
        where = f"user op {self.op_name!r} ({self.op_type_name!r})"
        unknown = sorted(set(self.inputs) - set(spec.inputs))
        missing = [n for n in spec.inputs if n not in self.inputs]
        if unknown or missing:
            raise ValueError(f"{where}: inputs {sorted(self.inputs)} do not match the op "
                             f"type's {list(spec.inputs)}")
        for name, blobs in self.inputs.items():
            if name not in spec.list_inputs and len(blobs) != 1:
                raise ValueError(f"{where}: input {name!r} takes one Blob, got {len(blobs)}")
        bad_outputs = sorted(set(self.outputs) - set(spec.outputs))
        if bad_outputs:
            raise ValueError(f"{where}: outputs {bad_outputs} are not outputs of the op type "
                             f"(it has {list(spec.outputs)})")
        attrs = dict(spec.attrs)
        for name, value in self.attrs.items():
            if name not in attrs:
                raise ValueError(f"{where}: the op type has no attribute {name!r} (it has "
                                 f"{sorted(spec.attrs) or 'none'})")
            attrs[name] = value
        unset = sorted(n for n, v in attrs.items() if v is REQUIRED)
        if unset:
            raise ValueError(f"{where}: set the attributes {unset} with .Attr(name, value)")
        self._results = spec.build(self.inputs, attrs, current_graph().unique_name(
            self.op_name))
        return self

    def RemoteBlobList(self) -> tuple:  # noqa: N802
        """The outputs' Blobs, in the order of the ``Output`` calls."""
        return tuple(blob for blobs in self.RemoteBlobDict().values() for blob in blobs)

    def RemoteBlobDict(self) -> dict:  # noqa: N802
        """{output name: [Blob, ...]} for the declared outputs."""
        if self._results is None:
            raise RuntimeError(f"user op {self.op_name!r}: call InferAndTryRun() first")
        out = {}
        for name, count in self.outputs.items():
            blobs = self._results[name]
            if count != len(blobs):
                raise ValueError(f"user op {self.op_name!r}: output {name!r} has "
                                 f"{len(blobs)} Blob(s), Output() asked for {count}")
            out[name] = list(blobs)
        return out

    def SoleOutputBlob(self) -> Blob:  # noqa: N802
        """The op's only output Blob."""
        blobs = self.RemoteBlobList()
        if len(blobs) != 1:
            raise ValueError(f"user op {self.op_name!r} has {len(blobs)} outputs, not one")
        return blobs[0]


def _spec(op_type_name):
    if op_type_name is None:
        raise ValueError("user_op_builder: call .Op(op_type_name) before building")
    spec = USER_OPS.get(op_type_name)
    if spec is None:
        raise NotImplementedError(
            f"user_op_builder: op type {op_type_name!r} is not available in aioflow. It "
            f"builds these OneFlow op types from its own ops: {', '.join(sorted(USER_OPS))}; "
            "C++ custom ops cannot be registered")
    return spec


class UserOpConfBuilder:
    """Chained description of one op: ``Op``, ``Input``, ``Output``, ``Attr``, then
    ``Build()`` (the :class:`UserOp`)."""

    def __init__(self, op_name: str, op_type_name: str | None = None, module: bool = False):
        if not isinstance(op_name, str) or not op_name:
            raise ValueError(f"user_op_builder: op_name must be a non-empty str, got "
                             f"{op_name!r}")
        current_graph()   # a clear error outside a job function
        self.user_op_ = UserOp(op_name, op_type_name)
        self._module = module

    @property
    def user_op_module(self) -> UserOp:
        """The op a module builder describes (OneFlow's name for it)."""
        return self.user_op_

    def Op(self, op_type_name: str) -> "UserOpConfBuilder":  # noqa: N802
        if self._module:
            raise ValueError(f"user op module builder of {self.user_op_.op_type_name!r} "
                             "can't call '.Op(op_type_name)' method")
        _spec(op_type_name)
        self.user_op_.op_type_name = op_type_name
        return self

    def OpName(self, op_name: str) -> "UserOpConfBuilder":  # noqa: N802
        self.user_op_.op_name = op_name
        return self

    def Input(self, input_name: str, input_blob_list) -> "UserOpConfBuilder":  # noqa: N802
        if not isinstance(input_blob_list, (list, tuple)):
            raise TypeError(f"user op input {input_name!r}: expected a list of Blobs, got "
                            f"{type(input_blob_list).__name__}")
        for blob in input_blob_list:
            if not isinstance(blob, Blob):
                raise TypeError(f"user op input {input_name!r}: expected Blobs, got "
                                f"{type(blob).__name__}")
        size = self.user_op_.input_sizes.get(input_name)
        if size is not None and size != len(input_blob_list):
            raise ValueError(f"user op input {input_name!r}: InputSize said {size} Blobs, "
                             f"got {len(input_blob_list)}")
        self.user_op_.inputs[input_name] = list(input_blob_list)
        return self

    def InputSize(self, input_name: str, input_blob_size: int) -> "UserOpConfBuilder":  # noqa
        if isinstance(input_blob_size, bool) or not isinstance(input_blob_size, int) \
                or input_blob_size < 0:
            raise ValueError(f"user op input {input_name!r}: input_blob_size must be an int "
                             f">= 0, got {input_blob_size!r}")
        self.user_op_.input_sizes[input_name] = input_blob_size
        return self

    def Output(self, output_name: str, num: int = 1) -> "UserOpConfBuilder":  # noqa: N802
        if isinstance(num, bool) or not isinstance(num, int) or num < 1:
            raise ValueError(f"user op output {output_name!r}: num must be an int >= 1, got "
                             f"{num!r}")
        self.user_op_.outputs[output_name] = num
        return self

    def Attr(self, attr_name: str, attr_value, attr_type_name=None) -> "UserOpConfBuilder":  # noqa
        if attr_type_name is not None:
            warnings.warn("UserOpConfBuilder.Attr: attr_type_name is deprecated (as in "
                          "OneFlow); remove it", DeprecationWarning,
                          stacklevel=user_stacklevel())
        if not isinstance(attr_name, str):
            raise TypeError(f"user op attribute name must be a str, got {attr_name!r}")
        self.user_op_.attrs[attr_name] = attr_value
        return self

    def CheckAndComplete(self) -> "UserOpConfBuilder":  # noqa: N802
        """Check that the op type is known (the rest is checked when it is built)."""
        _spec(self.user_op_.op_type_name)
        return self

    def Build(self) -> UserOp:  # noqa: N802
        return self.CheckAndComplete().user_op_


def user_op_builder(op_name: str) -> UserOpConfBuilder:
    """A builder of the op named ``op_name`` (inside a job function)."""
    return UserOpConfBuilder(op_name)


def consistent_user_op_builder(op_name: str) -> UserOpConfBuilder:
    """The same as :func:`user_op_builder`: ops are built in the consistent view."""
    return UserOpConfBuilder(op_name)


def user_op_module_builder(op_type_name: str) -> UserOpConfBuilder:
    """A builder with the op type fixed (``Op`` raises); name each use with ``OpName``."""
    _spec(op_type_name)
    return UserOpConfBuilder(op_type_name, op_type_name, module=True)


def consistent_user_op_module_builder(op_type_name: str) -> UserOpConfBuilder:
    """The same as :func:`user_op_module_builder`."""
    return user_op_module_builder(op_type_name)
