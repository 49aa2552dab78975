"""Data parallel training over several devices: those of one process
(``flow.config.gpu_device_num(2)``: :mod:`aioflow.distributed.devices`) and several
processes (ranks), on MPI through mpi4py. The world's devices are its ranks times the
devices of each; the rules below hold for devices, of a rank or of the world.

Start a script on several ranks with ``python -m aioflow.launch -n 2 script.py`` (or
``mpiexec -n 2 python script.py``); each rank runs the whole script. A process that no
launcher started is a world of one, and never imports mpi4py:

>>> import aioflow.distributed as dist
>>> dist.rank(), dist.size()
(0, 1)

What changes in a world of several ranks (see docs/distributed.md):

* ``tp.ListNumpy`` arguments hold one array per device; device ``i`` computes on
  element ``i``. ``tp.ListNumpy`` results come back as every device's value, on every
  rank.
* ``tp.Numpy`` placeholders with a batch axis hold the whole batch; each device computes
  on its slice, and results come back as one device would return them (gathered along
  the batch axis, or all-reduced when reduced over it); other jobs are refused.
* A train job's gradients are averaged over the devices (summed in the graph over a
  process's devices, then a bucketed all-reduce among ranks, before gradient clipping
  and the updates), so every rank applies the same update.
* Rank 0's initial variable values are broadcast; checkpoints are written by rank 0.
* Every collective has a deadline (``flow.config.collective_timeout``): a rank that
  fails, is killed or hangs makes the others stop with a message, never hang.
"""
from __future__ import annotations

from .state import communicator, is_distributed, world
from . import faults, resources
from .collectives import allgather_object

__all__ = ["world", "rank", "size", "is_distributed", "barrier", "setup"]


def rank() -> int:
    """This process's rank (0 in a world of one)."""
    return world().rank


def size() -> int:
    """How many ranks the world has (1 without a launcher)."""
    return world().size


def barrier(what: str = "flow.distributed.barrier()") -> None:
    """Wait until every rank got here (with the collective deadline). A no-op alone."""
    if is_distributed():
        allgather_object(None, what)


def setup() -> None:
    """Join the world when a launcher started this process as one of several: initialise
    MPI, give this rank its share of the cores, make an uncaught error stop every rank,
    (checkpoints are rank-aware by themselves:
    :mod:`aioflow.checkpoint.ranks`). Called by ``import aioflow``; a no-op alone."""
    current = world()
    if not current.distributed:
        return
    faults.install(current)
    resources.share_cores(current)
