"""What a job sees of its surroundings while it is traced: ``flow.current_scope()`` and
``flow.current_global_function_desc()`` (OneFlow's scope and function-description
objects, reduced to what has a meaning here).

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
...     with flow.scope.placement("cpu", "0:0"):
...         tag = flow.current_scope().device_parallel_desc_symbol.device_tag
...     trainable = flow.current_global_function_desc().IsTrainable()
...     return x + (1.0 if tag == "cpu" and not trainable else 0.0)
>>> job(np.zeros(2, np.float32)).tolist()
[1.0, 1.0]
"""
from __future__ import annotations

import warnings

from .._core.callsite import user_stacklevel
from .._core.deprecation import mark_deprecated
from .function_settings import SETTINGS
from ..ir import current_graph, is_tracing
from ..ir.blob_facts import on_default_device_tag
from .. import backends
from .._core import settings
from .function_config import FunctionConfig

__all__ = ["Scope", "ParallelDesc", "FunctionDesc", "current_scope",
           "deprecated_current_scope", "current_global_function_desc"]


def _default_device_tag() -> str:
    """Where ops outside any ``flow.scope.placement`` block run: the GPU when GPUs are
    configured (``flow.config.gpu_device_num``, default 1) and one is usable."""
    return "gpu" if settings.get("gpu_device_num") > 0 and backends.gpu_usable() else "cpu"


on_default_device_tag(_default_device_tag)   # Blob.parallel_conf of an op placed by default


class ParallelDesc:
    """The devices ops are placed on: ``device_tag`` ("cpu" or "gpu"), ``parallel_num``
    (the devices of this process a job runs on: 1, or ``flow.config.gpu_device_num(n)``'s
    in a job of several, aioflow/distributed/devices.py) and
    ``machine_id2device_id_list``."""

    def __init__(self, device_tag: str, parallel_num: int = 1):
        self.device_tag = device_tag
        self.parallel_num = parallel_num
        self.machine_id2device_id_list = {0: list(range(parallel_num))}

    def __repr__(self) -> str:
        return (f"ParallelDesc(device_tag={self.device_tag!r}, "
                f"parallel_num={self.parallel_num})")


class Scope:
    """The scope ops are built in: ``device_parallel_desc_symbol`` (a :class:`ParallelDesc`),
    ``job_desc_symbol`` (the job's :class:`FunctionDesc`, None outside a job) and
    ``scope_op_name_prefixes`` (the ``flow.scope.namespace`` names in effect)."""

    def __init__(self, device_tag: str, job_desc=None, prefixes=(), parallel_num: int = 1):
        self.device_parallel_desc_symbol = ParallelDesc(device_tag, parallel_num)
        self.job_desc_symbol = job_desc
        self.scope_op_name_prefixes = list(prefixes)

    def __repr__(self) -> str:
        return (f"Scope(device_tag={self.device_parallel_desc_symbol.device_tag!r}, "
                f"prefixes={self.scope_op_name_prefixes})")


def current_scope() -> Scope:
    """The scope of the op that would be built now: inside a job function, its placement
    and namespaces; outside, the default placement.

    >>> current_scope().scope_op_name_prefixes
    []
    """
    if not is_tracing():
        return Scope(_default_device_tag())
    graph = current_graph()
    tag = graph.device if graph.device in ("cpu", "gpu") else _default_device_tag()
    devices = graph.devices.count if graph.devices is not None else 1
    return Scope(tag, FunctionDesc(graph), graph.name_scope, devices)


@mark_deprecated
def deprecated_current_scope() -> Scope:
    """``flow.scope.current_scope()``: OneFlow's deprecated spelling of
    ``flow.current_scope()``; warns (``DeprecationWarning``) and returns the same."""
    warnings.warn("flow.scope.current_scope is deprecated: use flow.current_scope",
                  DeprecationWarning, stacklevel=user_stacklevel())
    return current_scope()


class FunctionDesc:
    """The job being traced: ``job_func`` (its job function), ``job_config`` (its
    ``flow.function_config()``), ``IsTrainable()`` and ``HasAttr(name)``; any setting of
    the config reads as an attribute (``desc.default_data_type``)."""

    def __init__(self, graph):
        self.job_func = graph.job_function
        self.job_config = graph.config if graph.config is not None else FunctionConfig()
        self._trainable = graph.job_type == "train"

    def IsTrainable(self) -> bool:  # noqa: N802 - OneFlow's name
        """Whether the job is a train job."""
        return self._trainable

    def HasAttr(self, attr_name: str) -> bool:  # noqa: N802 - OneFlow's name
        """Whether ``attr_name`` is a setting of the job's config."""
        return not attr_name.startswith("_") and callable(getattr(self.job_config, attr_name,
                                                                   None))

    def __getattr__(self, attr_name: str):
        if attr_name.startswith("_") or not self.HasAttr(attr_name):
            raise AttributeError(f"the job's function config has no setting {attr_name!r}")
        if attr_name in SETTINGS:   # OneFlow's setters: called bare, they would set True
            return self.job_config.setting(attr_name)
        return getattr(self.job_config, attr_name)()


def current_global_function_desc() -> FunctionDesc:
    """The description of the job function being traced (``RuntimeError`` outside one)."""
    if not is_tracing():
        raise RuntimeError("flow.current_global_function_desc() is only available inside a "
                           "job function while it is traced")
    return FunctionDesc(current_graph())
