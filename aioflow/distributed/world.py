"""Which process of which world this is: read from the launcher's environment, so that a
single process never imports mpi4py.

A launcher tells each process its place through environment variables: MPICH's Hydra
sets ``PMI_RANK``/``PMI_SIZE`` (and ``MPI_LOCALNRANKS``), Open MPI
``OMPI_COMM_WORLD_RANK``/``OMPI_COMM_WORLD_SIZE``, PMIx launchers ``PMIX_RANK`` (with the
size only from MPI itself). Only when they say the world has more than one process is
mpi4py imported (which initialises MPI). A child process started by a rank (a data
loader's worker, ``multiprocessing``) inherits those variables but must not initialise
MPI again: the rank that owns MPI records its pid in ``AIOFLOW_MPI_OWNER``, and a process
that finds another pid there is a world of one.

>>> from aioflow.distributed.world import detect_size
>>> detect_size({})
1
>>> detect_size({"PMI_SIZE": "4", "PMI_RANK": "1"})
4
>>> detect_size({"PMI_SIZE": "4", "AIOFLOW_MPI_OWNER": "1"})   # a rank's child process
1
"""
from __future__ import annotations

import os

OWNER_VARIABLE = "AIOFLOW_MPI_OWNER"
_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")


def detect_size(environ=None) -> int:
    """How many processes the launcher's environment says the world has (1 when none).

    ``PMIX_RANK`` alone (a PMIx launcher that sets no size) counts as "several": MPI
    itself then tells the size."""
    environ = os.environ if environ is None else environ
    owner = environ.get(OWNER_VARIABLE)
    if owner is not None and owner != str(os.getpid()):
        return 1    # a child of a rank: MPI belongs to the parent
    for name in _SIZE_VARIABLES:
        value = environ.get(name)
        if value:
            try:
                return max(1, int(value))
            except ValueError:
                raise ValueError(f"aioflow: the launcher's environment variable {name} "
                                 f"should be a number of processes, got {value!r}") from None
    if environ.get("PMIX_RANK") is not None:
        return 2    # at least two; MPI reports the exact size
    return 1


class World:
    """This process's place among the ranks: ``rank``, ``size``, ``local_rank`` and
    ``local_size`` (ranks on this host), ``hosts`` (their names, in rank order of first
    appearance), and ``comm`` (mpi4py's ``COMM_WORLD``, None in a world of one)."""

    def __init__(self, rank=0, size=1, local_rank=0, local_size=1, hosts=None, comm=None):
        self.rank = rank
        self.size = size
        self.local_rank = local_rank
        self.local_size = local_size
        self.hosts = list(hosts or [_hostname()])
        self.comm = comm
        self.pid = os.getpid()

    @property
    def distributed(self) -> bool:
        return self.size > 1

    def __repr__(self) -> str:
        return (f"World(rank={self.rank}, size={self.size}, local_rank={self.local_rank}, "
                f"local_size={self.local_size}, hosts={self.hosts})")


def _hostname() -> str:
    import socket
    return socket.gethostname()


def join_mpi() -> World:
    """Initialise MPI through mpi4py and read this process's place (collective: every
    rank calls it once, at ``import aioflow``)."""
    try:
        import mpi4py
    except ImportError:
        raise ImportError(
            "aioflow: the launcher's environment says this process is one of several "
            "(e.g. PMI_SIZE), but mpi4py is not installed: pip install 'aioflow[mpi]'"
        ) from None
    mpi4py.rc.thread_level = "multiple"   # aioflow's communication thread makes the calls
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    os.environ[OWNER_VARIABLE] = str(os.getpid())
    local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.rank)
    names = comm.allgather(MPI.Get_processor_name())
    hosts = list(dict.fromkeys(names))
    world = World(comm.rank, comm.size, local.rank, local.size, hosts, comm)
    local.Free()
    return world
