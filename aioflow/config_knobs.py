"""The rest of OneFlow v0.3.4's ``flow.config`` setters (``config_util.py``): knobs of its
C++ runtime (RDMA buffers, NCCL fusion, thread pools) that have no meaning in aioflow.

Each is accepted with OneFlow's signature and argument check (``assert type(val) is
int`` and friends: a bool is no int here either), and its first call warns once (a
``RuntimeWarning`` at the user's line) that it changes nothing, and why; none pretends to
act. ``flow.config.collective_boxing.*`` are the same for OneFlow's collective
communication. ``docs/porting.md`` lists them all.

>>> import aioflow as flow
>>> flow.config.collective_boxing.nccl_fusion_threshold_mb("16")
Traceback (most recent call last):
...
TypeError: flow.config.collective_boxing.nccl_fusion_threshold_mb: expected an int, got '16'
"""
from __future__ import annotations

import types
from ._core.warn import warn_once

__all__ = ["KNOBS", "collective_boxing", "no_effect_rows"]

_REQUIRED = object()

_NETWORK = "aioflow has no network transport of its own (ranks talk through MPI)"
_THREADS = "aioflow runs its kernels on its own compute thread and worker pool"
_MEMORY = "aioflow reserves no memory up front; buffers are planned per job"
_NCCL = ("aioflow all-reduces gradients through MPI between ranks, one collective per "
         "step, with no NCCL fusion to tune")

# name, type of the value, the value of a bare call (_REQUIRED: none), why it does nothing
KNOBS = [
    ("load_library", str, _REQUIRED, "aioflow loads no C++ op libraries; custom ops are "
     "written in Python (flow.user_op_builder)"),
    ("load_library_now", str, _REQUIRED, "aioflow loads no C++ op libraries; custom ops "
     "are written in Python (flow.user_op_builder)"),
    ("comm_net_worker_num", int, _REQUIRED, _NETWORK),
    ("max_mdsave_worker_num", int, _REQUIRED, "checkpoints are written by the calling "
     "thread"),
    ("enable_numa_aware_cuda_malloc_host", bool, True, "aioflow allocates no pinned host "
     "memory by NUMA node"),
    ("compute_thread_pool_size", int, _REQUIRED, _THREADS + " (flow.config."
     "kernel_threading)"),
    ("rdma_mem_block_mbyte", int, _REQUIRED, _NETWORK),
    ("rdma_recv_msg_buf_mbyte", int, _REQUIRED, _NETWORK),
    ("reserved_host_mem_mbyte", int, _REQUIRED, _MEMORY),
    ("reserved_device_mem_mbyte", int, _REQUIRED, _MEMORY),
    ("use_rdma", bool, True, _NETWORK),
    ("thread_enable_local_message_queue", bool, _REQUIRED, _THREADS),
    ("persistence_buf_byte", int, _REQUIRED, "checkpoint files are written whole"),
    # OneFlow asserted an int here (its own slip: the documented value is a bool); both
    # are taken.
    ("collect_act_event", (bool, int), True, "aioflow records no actor events; "
     "flow.config.enable_debug_mode and the profiler in docs/runtime.md show step times"),
]

BOXING_KNOBS = [
    ("enable_fusion", bool, True), ("num_callback_threads", int, _REQUIRED),
    ("nccl_num_streams", int, _REQUIRED), ("nccl_fusion_threshold_mb", int, _REQUIRED),
    ("nccl_fusion_all_reduce_use_buffer", bool, _REQUIRED),
    ("nccl_fusion_all_reduce", bool, _REQUIRED), ("nccl_fusion_reduce_scatter", bool, _REQUIRED),
    ("nccl_fusion_all_gather", bool, _REQUIRED), ("nccl_fusion_reduce", bool, _REQUIRED),
    ("nccl_fusion_broadcast", bool, _REQUIRED), ("nccl_fusion_max_ops", int, _REQUIRED),
    ("nccl_enable_all_to_all", bool, _REQUIRED), ("nccl_enable_mixed_fusion", bool, _REQUIRED),
]

_recorded: dict[str, object] = {}   # what each knob was last set to (read by tests, docs)


def _knob(public: str, kind, bare, why: str):
    """OneFlow's setter ``public``: check, record, warn once that it does nothing."""
    kinds = kind if isinstance(kind, tuple) else (kind,)

    def setter(val=_REQUIRED):
        if val is _REQUIRED:
            if bare is _REQUIRED:
                raise TypeError(f"{public}() needs a value")
            val = bare
        if not isinstance(val, kinds) or (bool not in kinds and isinstance(val, bool)):
            names = " or ".join(("an " if k is int else "a ") + k.__name__ for k in kinds)
            raise TypeError(f"{public}: expected {names}, got {val!r}")
        if isinstance(val, int) and not isinstance(val, bool) and val < 0:
            raise ValueError(f"{public}: expected an int >= 0, got {val!r}")
        _recorded[public] = val
        warn_once(public.removeprefix("flow."), f"{public}({val!r}) has no effect in "
                  f"aioflow: {why}")
    setter.__name__ = public.rpartition(".")[2]
    setter.__qualname__ = setter.__name__
    setter.__doc__ = f"No effect (OneFlow's ``{public}``): {why}."
    return setter


def recorded(public: str):
    """What the knob ``public`` (``"flow.config.use_rdma"``) was last set to, else None."""
    return _recorded.get(public)


setters = {name: _knob(f"flow.config.{name}", kind, bare, why)
           for name, kind, bare, why in KNOBS}

collective_boxing = types.ModuleType(
    "aioflow.config.collective_boxing",
    "``flow.config.collective_boxing``: OneFlow's NCCL collective settings, accepted, "
    "checked and without effect (" + _NCCL + ").")
for _name, _kind, _bare in BOXING_KNOBS:
    setattr(collective_boxing, _name,
            _knob(f"flow.config.collective_boxing.{_name}", _kind, _bare, _NCCL))
collective_boxing.__all__ = [name for name, _, _ in BOXING_KNOBS]


def no_effect_rows() -> list[tuple[str, str]]:
    """(``flow.config.<name>``, why) of each knob here."""
    return ([(f"flow.config.{name}", why) for name, _, _, why in KNOBS]
            + [(f"flow.config.collective_boxing.{name}", _NCCL) for name, _, _ in BOXING_KNOBS])
