"""This process's world and communication thread, created once (at ``import aioflow``
for a rank of several; a world of one otherwise, without importing mpi4py)."""
from __future__ import annotations

import os
import threading

from .world import World, detect_size, join_mpi
from .comm import Communicator

_lock = threading.Lock()
_state: dict = {"world": None, "communicator": None}


def world() -> World:
    """The world this process belongs to (a child process of a rank gets a world of one:
    the MPI state it inherited through ``fork`` belongs to its parent)."""
    current = _state["world"]
    if current is not None and current.pid == os.getpid():
        return current
    with _lock:
        current = _state["world"]
        if current is None or current.pid != os.getpid():
            current = join_mpi() if (current is None and detect_size() > 1) else World()
            _state["world"] = current
            _state["communicator"] = None
    return current


def communicator():
    """The communication thread (started at the first collective)."""
    comm = _state["communicator"]
    if comm is None:
        with _lock:
            comm = _state["communicator"]
            if comm is None:
                comm = _state["communicator"] = Communicator(world())
    return comm


def is_distributed() -> bool:
    return world().distributed
