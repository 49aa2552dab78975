"""Each rank's share of the cores of its host, and the machine count of ``flow.config``
(its device counts: :mod:`aioflow.distributed.devices`).

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


def check_machine_count(n: int, where: str = "flow.config.machine_num") -> None:
    current = world()
    if n != len(current.hosts):
        raise ValueError(
            f"{where}: the world of {current.size} rank(s) runs on {len(current.hosts)} "
            f"machine(s) ({', '.join(current.hosts)}), got {n}; start the ranks with "
            "python -m aioflow.launch --hosts ... (or mpiexec) on that many machines")
