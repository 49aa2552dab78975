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
from ._core.deprecation import mark_deprecated
from .distributed.resources import check_machine_count
from .distributed import world
from .distributed.world import _hostname
from . import config
from ._core.no_effect import accept

__all__ = ["machine", "ctrl_port", "data_port", "log_dir", "current_machine_id", "init",
           "current_resource", "Resource", "grpc_use_no_signal", "logtostderr",
           "logbuflevel"]


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
    hosts = world().hosts
    name = _hostname()
    return hosts.index(name) if name in hosts else 0


def init() -> bool:
    """OneFlow's ``flow.env.init()``: start the environment, returning True if this call
    started it and False if it was running already. aioflow's environment is ready when
    ``import aioflow`` returns (a launcher's ranks join their world there), so this
    always returns False and changes nothing.

    >>> init()
    False
    """
    return False


class Resource:
    """What ``flow.env.current_resource()`` reports: ``machine_num`` (hosts of the
    world), ``gpu_device_num`` and ``cpu_device_num`` (``flow.config``'s counts, per
    machine) and ``enable_debug_mode``."""

    def __init__(self, machine_num: int, gpu_device_num: int, cpu_device_num: int,
                 enable_debug_mode: bool):
        self.machine_num = machine_num
        self.gpu_device_num = gpu_device_num
        self.cpu_device_num = cpu_device_num
        self.enable_debug_mode = enable_debug_mode

    def __repr__(self) -> str:
        return (f"Resource(machine_num={self.machine_num}, gpu_device_num="
                f"{self.gpu_device_num}, cpu_device_num={self.cpu_device_num})")


def current_resource() -> Resource:
    """The resources this process runs with (also ``flow.current_resource()``).

    >>> current_resource().machine_num
    1
    """
    return Resource(max(len(world().hosts), 1), config.get("gpu_device_num"),
                    config.get("cpu_device_num"), bool(config.get("debug")))


def _no_effect(name: str, value, why: str, kind: type) -> None:
    accept(f"flow.env.{name}", value, why, kind)


@mark_deprecated
def grpc_use_no_signal(val: bool = True) -> None:
    """No effect: aioflow has no gRPC control plane (a launcher's ranks talk over MPI)."""
    _no_effect("grpc_use_no_signal", val, "it has no gRPC control plane; ranks talk over "
               "MPI", bool)


def logtostderr(val: int) -> None:
    """No effect: a setting of OneFlow's C++ logging (glog). aioflow logs through
    Python's ``logging`` (logger ``"aioflow"``)."""
    _no_effect("logtostderr", val, "it logs through Python's logging module (logger "
               "'aioflow'), not glog", int)


def logbuflevel(val: int) -> None:
    """No effect: see :func:`logtostderr`."""
    _no_effect("logbuflevel", val, "it logs through Python's logging module (logger "
               "'aioflow'), not glog", int)
