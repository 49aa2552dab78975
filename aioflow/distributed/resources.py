"""Each rank's share of the cores of its host, and the device counts of ``flow.config``.

Why: every rank's BLAS would otherwise start one thread per core, and ranks x threads
oversubscribe the host (two ranks of two OpenBLAS threads on two cores ran 20x slower
than one thread each, issue 16).
"""
from __future__ import annotations

import os
from ..kernels import parallel
from .state import world


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else (os.cpu_count() or 1)


def share_cores(world) -> int:
    """Set this rank's BLAS threads to its share of the host's cores; returns it."""
    share = max(1, cores() // max(1, world.local_size))
    if parallel._blas_controller() is not None:
        parallel._set_blas_threads(share)
    parallel._state["workers"] = None   # recount with the new BLAS threads
    return share


def check_device_count(name: str, n: int) -> None:
    """``flow.config.{cpu,gpu}_device_num(n)`` in a world of several ranks: one rank runs
    one device, so ``n`` (devices per machine) must be the ranks on this host (or 1)."""
    current = world()
    if current.distributed and n not in (1, current.local_size):
        raise ValueError(
            f"flow.config.{name}: this host runs {current.local_size} ranks (one device "
            f"each), got {n} devices per machine; start {n} ranks per host "
            f"(python -m aioflow.launch -n ...) or set {current.local_size}")


def check_machine_count(n: int, where: str = "flow.config.machine_num") -> None:
    current = world()
    if n != len(current.hosts):
        raise ValueError(
            f"{where}: the world of {current.size} rank(s) runs on {len(current.hosts)} "
            f"machine(s) ({', '.join(current.hosts)}), got {n}; start the ranks with "
            "python -m aioflow.launch --hosts ... (or mpiexec) on that many machines")
