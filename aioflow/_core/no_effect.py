"""OneFlow settings of its own C++ runtime that have no meaning in aioflow (issue 18).

Each is accepted so OneFlow scripts run, its value is checked, and the first call warns
once (a ``RuntimeWarning`` at the user's line) that it changes nothing: none pretends to
act. ``docs/porting.md`` lists them.
"""
from __future__ import annotations

from .warn import warn_once

__all__ = ["accept", "inter_job_reuse_mem_strategy"]


def accept(name: str, value, why: str, kind: type = bool) -> None:
    """Check ``value`` (a ``kind``; bools are not ints) and warn once that ``name`` (the
    public spelling, e.g. ``"flow.env.logtostderr"``) has no effect, and ``why``."""
    wrong = not isinstance(value, kind) or (kind is not bool and isinstance(value, bool))
    if wrong:
        raise TypeError(f"{name}: expected a {kind.__name__}, got {value!r}")
    warn_once(name.removeprefix("flow."), f"{name}({value!r}) has no effect in aioflow: {why}")


_REUSE_STRATEGIES = ("reuse_mem_priority", "parallelism_priority", "custom_parallelism")


def inter_job_reuse_mem_strategy(strategy_str: str, job_set=None, **kwargs) -> None:
    """No effect: OneFlow's choice of whether jobs share device memory. aioflow plans
    each job's buffers on its own (``flow.config.enable_memory_plan``); jobs never share
    them. The strategy is checked as OneFlow did (``custom_parallelism`` needs
    ``job_name_groups=``)."""
    if strategy_str not in _REUSE_STRATEGIES:
        raise ValueError(f"inter_job_reuse_mem_strategy: strategy_str must be one of "
                         f"{', '.join(_REUSE_STRATEGIES)}, got {strategy_str!r}")
    if strategy_str == "custom_parallelism" and kwargs.get("job_name_groups") is None:
        raise ValueError("inter_job_reuse_mem_strategy('custom_parallelism') needs "
                         "job_name_groups=[[job names], ...]")
    accept("flow.inter_job_reuse_mem_strategy", strategy_str, "each job plans its own "
           "buffers; jobs never share memory", str)
