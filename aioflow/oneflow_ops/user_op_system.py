"""OneFlow op types that its own job passes insert (loss scaling, gradient clipping,
split gradients), built by name through ``flow.user_op_builder`` as its op tests do:
``dynamic_loss_scale_schedule``, ``multi_square_sum``, ``split_like`` and
``fused_cast_scale``. Each is composed
of aioflow's ops, so shapes are checked and gradients come from the parts; their entries
join :data:`aioflow.oneflow_ops.user_op_table.USER_OPS`.
"""
from __future__ import annotations

import numpy as np

from . import math_api as math
from .assign_api import assign
from .dynamic_api import where
from .ops_api import cast, constant, ones_like, reshape, slice as slice_, zeros_like
from .user_op_spec import REQUIRED, UserOpSpec

__all__ = ["SYSTEM_USER_OPS"]

_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _dynamic_loss_scale_schedule(ins, attrs, name):
    """OneFlow's kernel, written to the variables at the end of the step (``flow.assign``):
    no non-finite gradient -> the good-step counter counts up, and on reaching
    ``increment_period`` the scale is multiplied by ``multiplier`` (at most float32's max)
    and the counter restarts; otherwise the counter restarts and the scale is divided by
    ``multiplier`` (at least 1)."""
    count, scale, counter = (ins[k][0] for k in ("count_not_finite", "loss_scale",
                                                 "good_step_counter"))
    period, multiplier = int(attrs["increment_period"]), float(attrs["multiplier"])
    finite = math.equal(count, zeros_like(count))
    next_count = counter + ones_like(counter)
    grow = math.logical_and(finite, math.greater_equal(
        next_count, constant(period, dtype=counter.dtype, shape=counter.shape)))
    zero = zeros_like(counter)
    new_counter = where(grow, zero, where(finite, next_count, zero))
    grown = math.minimum(scale * multiplier, _FLOAT32_MAX)
    shrunk = math.maximum(scale / multiplier, 1.0)
    new_scale = where(grow, grown, where(finite, scale, shrunk))
    assign(counter, new_counter, name=f"{name}-good_step_counter")
    assign(scale, new_scale, name=f"{name}-loss_scale")
    return {}


def _multi_square_sum(ins, attrs, name):
    """The sum of the squares of every element of every input: shape (1,)."""
    parts = [math.reduce_sum(math.square(x)) for x in ins["x"]]
    total = parts[0] if len(parts) == 1 else math.add_n(parts)
    return {"y": [reshape(total, (1,), name=name)]}


def _fused_cast_scale(ins, attrs, name):
    """``x`` cast to ``scalar``'s dtype, times ``scalar`` (shape (1,)): OneFlow's kernel
    of the cast-scale fusion pass."""
    x, scalar = ins["x"][0], ins["scalar"][0]
    if scalar.shape != (1,):
        raise ValueError(f"user op {name!r} (fused_cast_scale): scalar must have shape (1,), "
                         f"got {scalar.shape}")
    return {"y": [math.multiply(cast(x, scalar.dtype), scalar, name=name)]}


def _split_like(ins, attrs, name):
    """``in`` cut along ``axis`` into pieces as long as each ``like`` along it."""
    x, likes = ins["in"][0], ins["like"]
    axis = int(attrs["axis"]) % max(x.ndim, 1)
    sizes = []
    for i, like in enumerate(likes):
        if like.ndim <= axis:
            raise ValueError(f"user op {name!r} (split_like): like[{i}] of shape {like.shape} "
                             f"has no axis {axis}")
        sizes.append(like.shape[axis])
    if sum(sizes) != x.shape[axis]:
        raise ValueError(f"user op {name!r} (split_like): the likes' sizes along axis {axis} "
                         f"({sizes}) must add up to in's {x.shape[axis]}")
    pieces, start = [], 0
    for i, size in enumerate(sizes):
        begin = [0] * x.ndim
        begin[axis] = start
        extent = list(x.shape)
        extent[axis] = size
        pieces.append(slice_(x, begin, extent, name=f"{name}-out{i}"))
        start += size
    return {"out": pieces}


SYSTEM_USER_OPS: dict[str, UserOpSpec] = {
    "dynamic_loss_scale_schedule": UserOpSpec(
        ("count_not_finite", "loss_scale", "good_step_counter"), (),
        _dynamic_loss_scale_schedule, {"increment_period": REQUIRED, "multiplier": REQUIRED}),
    "multi_square_sum": UserOpSpec(("x",), ("y",), _multi_square_sum, list_inputs=("x",)),
    "split_like": UserOpSpec(("in", "like"), ("out",), _split_like, {"axis": REQUIRED},
                             list_inputs=("like",)),
    "fused_cast_scale": UserOpSpec(("x", "scalar"), ("y",), _fused_cast_scale),
}
