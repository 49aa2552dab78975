"""The process-wide settings store: what ``flow.config`` sets and the layers below read.

Settings flow one way. The public ``flow.config`` (:mod:`aioflow.config`) checks a value
and :func:`put` s it here; the modules that read a setting (backends, the runtime's
allocator, the session, MPI's communicator) import this module, never ``flow.config``,
and those that must act at once on a change register with :func:`on_change`.

>>> get("pipeline_depth")
2
>>> seen = []
>>> on_change("debug", seen.append)
>>> put("debug", True); put("debug", False); seen
[True, False]
>>> _watchers["debug"].remove(seen.append)
"""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["get", "put", "on_change"]

# Written by flow.config's setters (the user's thread), read by any thread: each value is
# replaced whole (a dict store is atomic under the GIL), never mutated in place.
_settings: dict[str, Any] = {
    "gpu_device_num": 1, "cpu_device_num": 1, "machine_num": 1, "debug": False,
    "pipeline_depth": 2, "fusion": True, "memory_plan": True,
    "kernel_threading": "auto", "conv_algorithm": "auto", "tune_malloc": True,
    "await_on_loop_ms": 5.0, "inline_callback_ms": 10.0,
    "check_finite_inputs": True, "skip_nonfinite_steps": True,
    "collective_timeout": 300.0, "launch_fusion": "auto", "cuda_graphs": True,
    # OneFlow's runtime knobs that aioflow records without acting on them
    "legacy_model_io": False, "model_io_v2": False, "tensor_float_32_compute": True,
}
_watchers: dict[str, list[Callable[[Any], None]]] = {}


def get(name: str):
    """The current value of the setting ``name``."""
    return _settings[name]


def put(name: str, value) -> None:
    """Set ``name`` (already checked by its setter) and tell its watchers."""
    _settings[name] = value
    for callback in _watchers.get(name, ()):
        callback(value)


def on_change(name: str, callback: Callable[[Any], None]) -> None:
    """Call ``callback(value)`` whenever the setting ``name`` is set (for the modules that
    act on a setting at once: the session's pipeline depth, the allocator thresholds)."""
    _watchers.setdefault(name, []).append(callback)
