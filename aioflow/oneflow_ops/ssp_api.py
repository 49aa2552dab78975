"""``flow.experimental.ssp_variable_proxy``: OneFlow's stale-synchronous view of a
variable, for pipelines whose stages read weights several steps old.

``ref, value = ssp_variable_proxy(w, buffer_size=B)``: ``ref`` is the variable itself
(assign to it as usual), ``value`` its value B steps late: ``value`` at step t is ``w`` as
it was at the end of step t - B (its initial value for the first B steps). aioflow keeps
the last B - 1 start-of-step values of ``w`` in a ring, a hidden variable
``<w>-ssp_ring`` (and a step counter ``<w>-ssp_step``), updated at the end of each step.
"""
from __future__ import annotations

import contextlib
import numbers

import numpy as np

from .._core import dtypes
from .. import initializers as init
from ..engine.variables import read_declared
from ..ir import current_graph
from ..ops import state as _state
from .array_ops import one_hot
from .assign_api import assign, variable_name
from .math_api import add, equal, mod, multiply, reduce_sum
from .ops_api import cast, constant, reshape

__all__ = ["ssp_variable_proxy", "scope"]


def _state_variable(name: str, shape: tuple, dtype):
    """A hidden, untrained variable named after the one it serves (no namespace prefix)."""
    graph = current_graph()
    graph.session.declare_variable(name, shape, dtype, init.zeros_initializer(), False, graph)
    graph.variable_trainable.setdefault(name, False)
    return read_declared(name)


def ssp_variable_proxy(var, buffer_size: int = 1, name=None):
    """``(ref, value)``: ``ref`` the variable ``var`` (a ``flow.get_variable`` Blob), and
    ``value`` its value ``buffer_size`` steps ago: ``var`` as it was at the end of step
    t - buffer_size, or its initial value while t < buffer_size."""
    what = "flow.experimental.ssp_variable_proxy"
    var_name = variable_name(var, what)
    if isinstance(buffer_size, bool) or not isinstance(buffer_size, numbers.Integral) \
            or buffer_size < 1:
        raise ValueError(f"{what}: buffer_size must be a positive int, got {buffer_size!r}")
    slots = int(buffer_size) - 1
    if slots == 0:           # one step late: the start-of-step value itself
        return var, var
    return var, _state.ssp_value(_stale(var, var_name, slots), var, name=name)


def _stale(var, var_name: str, slots: int):
    """``var`` as it was at the start of step t - slots (its first value before that)."""
    ring = _state_variable(f"{var_name}-ssp_ring", (slots,) + var.shape, var.dtype)
    step = _state_variable(f"{var_name}-ssp_step", (1,), dtypes.int64)
    # The first step fills the ring with the variable's initial value.
    first = reshape(cast(equal(step, constant(0, dtype=dtypes.int64)), var.dtype),
                    (1,) * (var.ndim + 1))
    tiled = multiply(reshape(var, (1,) + var.shape),
                     constant(np.ones((slots,) + (1,) * var.ndim), dtype=var.dtype))
    filled = add(multiply(first, tiled), multiply(1 - first, ring))
    # The slot of this step holds the value of `slots` steps ago; it takes this one's.
    index = cast(mod(step, constant(slots, dtype=dtypes.int64)), dtypes.int32)
    pick = reshape(one_hot(index, slots, dtype=var.dtype), (slots,) + (1,) * var.ndim)
    assign(ring, add(multiply(filled, 1 - pick), multiply(pick, tiled)))
    assign(step, add(step, constant(1, dtype=dtypes.int64)))
    return reduce_sum(multiply(filled, pick), axis=0)


@contextlib.contextmanager
def _scope_config(ssp_num_stages: int | None = None, ssp_stage_id: int | None = None):
    """``flow.experimental.scope.config``: the pipeline stage of the ops built in the block.
    With ``function_config.enable_ssp(True)``, each variable the block reads
    (``flow.get_variable``) is read ``ssp_num_stages - ssp_stage_id`` steps late, as
    OneFlow's SSP pass does with ``ssp_variable_proxy``; its gradient still updates the
    current variable. Without ``enable_ssp`` the block changes nothing."""
    what = "flow.experimental.scope.config"
    for arg, value in (("ssp_num_stages", ssp_num_stages), ("ssp_stage_id", ssp_stage_id)):
        if value is not None and (isinstance(value, bool) or not isinstance(
                value, numbers.Integral) or value < 0):
            raise ValueError(f"{what}: {arg} must be an int >= 0, got {value!r}")
    graph = current_graph()
    config = graph.config
    enabled = config is not None and config.setting("enable_ssp") and ssp_num_stages
    if not enabled:
        yield
        return
    buffer_size = int(ssp_num_stages) - int(ssp_stage_id or 0)
    if buffer_size < 1:
        raise ValueError(f"{what}: ssp_stage_id {ssp_stage_id} must be below ssp_num_stages "
                         f"{ssp_num_stages}")
    proxies = graph.__dict__.setdefault("_ssp_proxies", {})

    def stale_read(name, blob):
        if (name, buffer_size) not in proxies:
            graph.variable_read_hook = None        # the proxy's own state reads are plain
            try:
                proxies[name, buffer_size] = ssp_variable_proxy(blob, buffer_size)[1]
            finally:
                graph.variable_read_hook = stale_read
        return proxies[name, buffer_size]

    previous, graph.variable_read_hook = graph.variable_read_hook, stale_read
    try:
        yield
    finally:
        graph.variable_read_hook = previous


class _ExperimentalScope:
    """``flow.experimental.scope``: OneFlow's namespace of ``config``."""

    config = staticmethod(_scope_config)


scope = _ExperimentalScope()
