"""Several devices in one process: OneFlow's ``flow.config.gpu_device_num(2)`` (or
``cpu_device_num(2)``) run as the device parts of one step.

OneFlow runs a job on every device of its placement: in the mirrored view each device
computes on its element of a ``tp.ListNumpy`` argument, in the consistent view on its
slice of the batch, and the devices' gradients are reduced before one update of the
variables. aioflow does the same with the rules of its ranks (docs/distributed.md): the
job function is traced once per device into one graph (:class:`DeviceTraces`), each part
with its own placeholders and all reading the same variables, so a step computes every
device's part, one after another on the job's backend, then averages the gradients
(:func:`aioflow.distributed.graph_ops.average_gradients`) and updates the variables
once. Results come back as from ranks: a ``tp.ListNumpy`` result is the list of every
device's value; a consistent job's ``tp.Numpy`` result is what one device would give for
the whole batch. With ranks, the world is ranks x devices per rank.

How many devices (:func:`for_job`): as in OneFlow, where a job's placeholders sit on its
default placement (``placement_util.GetDefaultMachineDeviceIds``): every GPU of the
machine while ``flow.config.gpu_device_num`` is above 0 (the default is 1), else every
CPU device (``cpu_device_num``). The ranks on one machine share its devices: each runs
``count / ranks on the host`` of them (a count of 1 gives every rank one device).

>>> JobDevices(2, "gpu_device_num", 2).describe()
'2 devices (flow.config.gpu_device_num(2))'
>>> print(JobDevices(2, "cpu_device_num", 4, ranks=2, local_ranks=2).describe())
4 devices: 2 ranks x 2 devices per rank (flow.config.cpu_device_num(4) per machine,
shared by the 2 ranks on this host)
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

from .._core import settings
from .state import world

__all__ = ["JobDevices", "for_job", "one", "per_rank", "check_device_count",
           "DeviceTraces"]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class JobDevices:
    """The devices a job runs on: ``count`` in this process (its device parts), from the
    setting ``setting`` (``per_machine`` devices per machine), on ``ranks`` ranks (this
    one ``rank``, ``local_ranks`` of them on this host); ``note`` says why another setting
    did not count."""

    count: int
    setting: str = "gpu_device_num"
    per_machine: int = 1
    ranks: int = 1
    rank: int = 0
    local_ranks: int = 1
    note: str = ""

    @property
    def world(self) -> int:
        """Devices of the whole world: what a ``tp.ListNumpy`` argument has one array per,
        and what a consistent-view batch is split over."""
        return self.ranks * self.count

    @property
    def first(self) -> int:
        """The world index of this process's first device (devices are numbered rank by
        rank)."""
        return self.rank * self.count

    def describe(self) -> str:
        """How many devices, and where the count comes from (for error messages)."""
        what = _plural(self.world, "device")
        where = f"flow.config.{self.setting}({self.per_machine})"
        if self.ranks == 1:
            text = f"{what} ({where})"
        elif self.count == 1:
            text = f"{what} ({self.ranks} ranks of one device each)"
        else:
            text = (f"{what}: {self.ranks} ranks x {self.count} devices per rank ({where} "
                    f"per machine, shared by the {self.local_ranks} ranks on this host)")
        return text + self.note


def one() -> JobDevices:
    """A job of one device in a world of one (what a job traced alone gets)."""
    return JobDevices(1)


def per_rank(setting: str, n: int, current=None) -> int:
    """Devices of each rank when the machine has ``n`` (``flow.config.<setting>``): all
    of them alone; shared out among the ranks on the host; at least one."""
    current = world() if current is None else current
    if not current.distributed:
        return max(n, 1)
    if n <= 1:
        return 1
    if n % current.local_size:
        raise ValueError(
            f"flow.config.{setting}({n}): this host runs {current.local_size} ranks, which "
            f"share its devices; the count per machine must be 1 or a multiple of "
            f"{current.local_size} (each rank then runs count / {current.local_size} "
            "devices)")
    return n // current.local_size


def check_device_count(setting: str, n: int) -> None:
    """``flow.config.{cpu,gpu}_device_num(n)``: refused where the ranks on this host cannot
    share ``n`` devices evenly (ValueError naming both)."""
    per_rank(setting, n)


def for_job() -> JobDevices:
    """The devices of a job compiled now: the settings' default placement (above)."""
    gpus, cpus = settings.get("gpu_device_num"), settings.get("cpu_device_num")
    setting, n = ("gpu_device_num", gpus) if gpus > 0 else ("cpu_device_num", cpus)
    current = world()
    note = ""
    if setting == "gpu_device_num" and cpus > 1 and cpus != gpus:
        note = (f"; flow.config.cpu_device_num({cpus}) counts only while gpu_device_num is "
                "0: as in OneFlow, a job's placeholders sit on the GPUs while "
                "gpu_device_num is above 0 (set flow.config.gpu_device_num(0) to run on "
                f"{cpus} CPU devices)")
    return JobDevices(per_rank(setting, n, current), setting, n, current.size,
                      current.rank, current.local_size, note)


class DeviceTraces:
    """Traces a job function once per device of this process into one graph.

    Before each device's trace the graph's naming counters go back to where device 0's
    began, so each part names its layers, and so its variables, as device 0's did (a
    part declaring a variable device 0's did not is an error); its ops get the prefix
    ``device<i>-``. Per device, the training target (``minimize``) is collected, and
    after the last the job's target is device 0's optimizer over every part's loss.
    What a part does beside computing stays device 0's alone, as a rank's own does:
    updates of state inside the job (batch normalization's moving statistics,
    ``flow.assign``) and ``flow.watch`` / ``watch_diff`` handlers (a watched variable's
    diff is that of device 0's loss: ``graph.other_devices`` names the other parts'
    blobs)."""

    def __init__(self, graph, devices: JobDevices):
        self.graph = graph
        self.devices = devices
        self.naming = graph.naming_state()
        self.targets: list = []

    @contextlib.contextmanager
    def part(self, index: int):
        """The block tracing device ``index`` (0, 1, ... in order)."""
        graph = self.graph
        graph.restore_naming(self.naming)
        graph.device_prefix = f"device{index}-" if index else ""
        nodes, watches = len(graph.nodes), len(graph.watches)
        variables = set(graph.variable_blobs)
        try:
            yield
        finally:
            graph.device_prefix = ""
        self.targets.append(graph.train_target)
        graph.train_target = None
        if index:
            self._keep_device_zeros(index, nodes, watches, variables)

    def _keep_device_zeros(self, index, nodes, watches, variables) -> None:
        graph = self.graph
        new = sorted(set(graph.variable_blobs) - variables)
        if new:
            raise ValueError(
                f"job function {graph.name!r}: traced again for device {index} of "
                f"{self.devices.count}, it declared variable(s) {', '.join(new)} that "
                "device 0's trace did not; every device must declare the same variables "
                "(give the layers and variables fixed names rather than names that depend "
                "on a counter outside the job)")
        graph.nodes[nodes:] = [n for n in graph.nodes[nodes:]
                               if not (n.op.side_effect and not n.outputs)]
        del graph.watches[watches:]
        graph.other_devices |= {b.id for n in graph.nodes[nodes:] for b in n.outputs}

    def finish(self) -> None:
        """Set the job's training target from every part's (after the last part)."""
        graph = self.graph
        targets = self.targets
        if all(t is None for t in targets):
            return
        if any(t is None for t in targets):
            raise RuntimeError(f"job function {graph.name!r}: minimize() was called in the "
                               "trace of some devices and not others")
        graph.train_target = (targets[0][0], [loss for _, losses in targets
                                              for loss in losses])
