"""``flow.env``: the machines of a job of several processes (OneFlow's multi-machine
settings), checked against the world the launcher started.

aioflow does not start processes on other machines itself: ``python -m aioflow.launch
--hosts a,b -n 4 script.py`` (or ``mpiexec``) does. ``flow.env.machine`` then checks that
the script names as many machines as the ranks run on, so a script written for two
machines fails at once on one.

>>> import aioflow as flow
>>> flow.env.machine([{"addr": "127.0.0.1"}])     # a single process: one machine
"""
from __future__ import annotations

__all__ = ["machine", "ctrl_port", "data_port", "log_dir", "current_machine_id"]


def machine(machines) -> None:
    """OneFlow's ``flow.env.machine([{"addr": ...}, ...])`` (or a list of addresses):
    the number of machines must be the hosts the ranks run on."""
    if isinstance(machines, (str, dict)) or not isinstance(machines, (list, tuple)):
        raise TypeError("flow.env.machine: expected a list of machines such as "
                        f"[{{'addr': '192.168.1.1'}}, ...], got {machines!r}")
    for entry in machines:
        if not (isinstance(entry, str) or (isinstance(entry, dict) and "addr" in entry)):
            raise TypeError("flow.env.machine: each machine must be an address or a dict "
                            f"with an 'addr' key, got {entry!r}")
    from .distributed.resources import check_machine_count
    check_machine_count(len(machines), "flow.env.machine")


def _port(name: str, port) -> None:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError(f"flow.env.{name}: expected a port number, got {port!r}")


def ctrl_port(port: int) -> None:
    """Accepted for OneFlow scripts; MPI's launcher chooses its own ports."""
    _port("ctrl_port", port)


def data_port(port: int) -> None:
    """Accepted for OneFlow scripts; MPI's launcher chooses its own ports."""
    _port("data_port", port)


def log_dir(path) -> None:
    """Accepted for OneFlow scripts; aioflow logs through the ``logging`` module."""


def current_machine_id() -> int:
    """The index of this process's host among the world's hosts (0 in a single process):
    OneFlow's ``flow.current_machine_id()``.

    >>> current_machine_id()
    0
    """
    from .distributed import world
    from .distributed.world import _hostname
    hosts = world().hosts
    name = _hostname()
    return hosts.index(name) if name in hosts else 0
