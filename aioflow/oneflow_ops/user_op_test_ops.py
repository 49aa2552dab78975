"""The op types OneFlow registers for its own tests (``user/ops/test_ops.cpp`` and
``user/kernels/test_kernels.cpp``, compiled into every OneFlow library, not only its test
build), built by name through ``flow.user_op_builder`` as its op tests do: ``TestSource``,
``TestSourceMultiGpuFixedOutNum``, ``TestRandomSource``,
``TestListDataTypeAndListShapeAndListStringAttr``, ``test_user_op_attr_auto_type`` and
``cpu_only_relu_test``. Their entries join
:data:`aioflow.oneflow_ops.user_op_table.USER_OPS`.
"""
from __future__ import annotations

import numpy as np

from .._core import dtypes
from ..ir import current_graph
from ..ops import random_ops
from .nn_api import relu
from .ops_api import constant, identity
from .user_op_spec import REQUIRED, UserOpSpec

__all__ = ["TEST_USER_OPS"]


def _source(values: np.ndarray, name: str):
    """A float32 constant whose batch axis is 0 (the test sources' SetBatchAxisInferFn)."""
    out = constant(values.astype(np.float32), dtype=dtypes.float32, name=name)
    out.graph.batch_axes[out.id] = 0
    return out


def _test_source(ins, attrs, name):
    """0, 1, 2, 3, 4 as float32 (TestSourceKernel)."""
    return {"out": [_source(np.arange(5), name)]}


def _test_source_multi_gpu_fixed_out_num(ins, attrs, name):
    """``out_num`` values split over the placement's devices as OneFlow's BalancedSplitter
    splits them (the first ``out_num % n`` devices one more), each device's part counting
    from 0; the parts concatenated, as the consistent view sees them."""
    out_num, devices = int(attrs["out_num"]), current_graph().placement_devices
    base, extra = divmod(out_num, devices)
    parts = [np.arange(base + (d < extra)) for d in range(devices)]
    return {"out": [_source(np.concatenate(parts), name)]}


def _test_random_source(ins, attrs, name):
    """5 uniform float32 draws a step from ``std::mt19937(seed)``, continuing from step
    to step (TestRandomSourceKernel: OneFlow's CPU RandomGenerator)."""
    return {"out": [random_ops.mt19937_uniform_op(seed=int(attrs["seed"]), key=name, count=5,
                                                   name=name)]}


def _test_list_attrs(ins, attrs, name):
    """One output per entry of ``out_shapes`` / ``out_types``, of that shape and dtype
    (the kernel writes nothing: zeros here); ``string_list`` must not be empty."""
    shapes, types, strings = attrs["out_shapes"], attrs["out_types"], attrs["string_list"]
    if len(shapes) != len(types) or not list(strings):
        raise ValueError(f"user op {name!r} (TestListDataTypeAndListShapeAndListStringAttr): "
                         "out_shapes and out_types must pair up, string_list be non-empty")
    outs = [constant(0, dtype=dtypes.convert(t), shape=tuple(s), name=f"{name}_out{i}")
            for i, (s, t) in enumerate(zip(shapes, types))]
    return {"out": outs}


def _cpu_only_relu(ins, attrs, name):
    """relu, placed on the CPU whatever the scope (a CPU-only op: OneFlow places it there)."""
    graph = current_graph()
    previous, graph.device = graph.device, "cpu"
    try:
        return {"out": [relu(ins["in"][0], name=name)]}
    finally:
        graph.device = previous


TEST_USER_OPS: dict[str, UserOpSpec] = {
    "TestSource": UserOpSpec((), ("out",), _test_source),
    "TestSourceMultiGpuFixedOutNum": UserOpSpec((), ("out",),
                                                _test_source_multi_gpu_fixed_out_num,
                                                {"out_num": REQUIRED}),
    "TestRandomSource": UserOpSpec((), ("out",), _test_random_source, {"seed": REQUIRED}),
    "TestListDataTypeAndListShapeAndListStringAttr": UserOpSpec(
        ("in",), ("out",), _test_list_attrs,
        {"out_shapes": REQUIRED, "out_types": REQUIRED, "string_list": REQUIRED}),
    "test_user_op_attr_auto_type": UserOpSpec(
        ("in",), ("out",), lambda ins, attrs, name: {"out": [identity(ins["in"][0],
                                                                      name=name)]},
        {"int1": REQUIRED, "int2": REQUIRED}),
    "cpu_only_relu_test": UserOpSpec(("in",), ("out",), _cpu_only_relu),
}
