"""``flow.scope``: device placement and logical views.

``flow.scope.placement("gpu", "0:0")`` places the ops built in its block on GPU 0 of
machine 0. Without a usable GPU (no CuPy, or no device), the job runs on the CPU after
one warning that points at the ``with`` line, so scripts written for a GPU run anywhere.
A job whose ops sit under a "gpu" placement runs on the GPU as a whole (see
:mod:`aioflow.backends` for how a job's backend is chosen, and ``AIOFLOW_DEVICE``).

>>> import aioflow as flow
>>> with flow.scope.placement("cpu", "0:0"):
...     pass
"""
from __future__ import annotations

import contextlib
import re
import warnings

from . import backends
from .engine.function_config import LogicalView
from .ir import is_tracing, current_graph
from ._core.warn import warn_once
from ._core.callsite import user_stacklevel
from ._core.deprecation import mark_deprecated

_DEVICE_TAGS = ("cpu", "gpu", "cuda")
_IDS = re.compile(r"^\s*(\d+)\s*:\s*(\d+)(\s*-\s*(\d+))?\s*$")


__all__ = [
    "placement",
    "consistent_view",
    "mirrored_view",
    "consistent_view_enabled",
    "mirrored_view_enabled",
    "namespace",
    "fixed_placement",
    "device_prior_placement",
    "current_scope",
]


def parse_device_ids(machine_device_ids) -> list[tuple[int, int]]:
    """"0:0" -> [(0, 0)]; "0:0-3" -> machine 0, devices 0 to 3 inclusive."""
    specs = [machine_device_ids] if isinstance(machine_device_ids, str) else list(
        machine_device_ids)
    out = []
    for spec in specs:
        match = _IDS.match(str(spec))
        if not match:
            raise ValueError(f"placement: machine_device_ids must look like '0:0' or '0:0-1', "
                             f"got {spec!r}")
        machine, first, last = int(match[1]), int(match[2]), int(match[4] or match[2])
        if last < first:
            raise ValueError(f"placement: device range {spec!r} is empty")
        out += [(machine, d) for d in range(first, last + 1)]
    return out


@contextlib.contextmanager
def placement(device_tag: str, machine_device_ids="0:0", hierarchy=None):
    """Place ops built in this block on ``device_tag`` ("cpu" or "gpu")."""
    if device_tag not in _DEVICE_TAGS:
        raise ValueError(f"placement: device_tag must be 'cpu' or 'gpu', got {device_tag!r}")
    ids = parse_device_ids(machine_device_ids)
    if any(machine != 0 for machine, _ in ids):
        raise ValueError(f"placement: aioflow runs on one machine (0), got "
                         f"{machine_device_ids!r}")
    device = "cpu"
    if device_tag != "cpu":
        device = "gpu"
        # No warning where the user chose the device: a simulated GPU serves the placement,
        # or AIOFLOW_DEVICE=cpu asked for the CPU (gpu without one is an error elsewhere).
        chosen = backends.simulating() or backends.device_override() is not None
        why = None if chosen else backends.gpu_unusable_reason()
        if why is not None:
            warn_once("no-gpu", f"flow.scope.placement({device_tag!r}): no usable GPU here "
                      f"({why}); running on the CPU instead")
    if not is_tracing():
        yield
        return
    graph = current_graph()
    _check_devices(graph, device_tag, machine_device_ids, len(ids))
    previous, graph.device = graph.device, device
    previous_devices, graph.placement_devices = graph.placement_devices, len(ids)
    try:
        yield
    finally:
        graph.device = previous
        graph.placement_devices = previous_devices


def _check_devices(graph, device_tag, machine_device_ids, named: int) -> None:
    """A job on several devices of this process (``flow.config.gpu_device_num(2)``...)
    computes each op on all of them: a placement inside it must name that many. (A job
    on one device per process runs each op once, whatever its placement names.)"""
    devices = graph.devices
    if devices is None or devices.count == 1 or named == devices.per_machine:
        return
    n = devices.per_machine
    raise ValueError(
        f"flow.scope.placement({device_tag!r}, {machine_device_ids!r}) names "
        f"{named} device{'s' if named != 1 else ''}, but job {graph.name!r} runs on "
        f"{devices.describe()}: a placement inside it must name them all ('0:0-{n - 1}'); "
        "aioflow does not place ops on some of a job's devices only")


fixed_placement = placement
device_prior_placement = placement


def consistent_view() -> LogicalView:
    """The default view: placeholders and results are whole logical tensors."""
    return LogicalView("consistent")


def mirrored_view() -> LogicalView:
    """Data-parallel view: ListNumpy inputs and results, one array per device."""
    return LogicalView("mirrored")


def _view_kind() -> str:
    """The view of the innermost ``with flow.scope.*_view():`` block; else the logical
    view of the job being traced; outside a job, the default."""
    if _view_stack:
        return _view_stack[-1]
    if is_tracing():
        config = current_graph().config
        if config is not None:
            return config.default_logical_view().kind
    return "consistent"


def consistent_view_enabled() -> bool:
    """Whether the job being traced uses the consistent view (the default; also outside a
    job).

    >>> consistent_view_enabled(), mirrored_view_enabled()
    (True, False)
    """
    return _view_kind() == "consistent"


def mirrored_view_enabled() -> bool:
    """Whether the job being traced uses the mirrored view
    (``function_config.default_logical_view(flow.scope.mirrored_view())``)."""
    return _view_kind() == "mirrored"


@contextlib.contextmanager
def namespace(name: str):
    """Prefix the names of the ops and variables created in the block with ``name-``
    (nested: ``outer-inner-``), as OneFlow does: ``get_variable("weight")`` inside
    ``namespace("layer1")`` is the variable ``layer1-weight``."""
    if not isinstance(name, str):
        raise TypeError(f"flow.scope.namespace: name must be a str, got {name!r}")
    graph = current_graph()
    graph.name_scope.append(name)
    try:
        yield
    finally:
        graph.name_scope.pop()


@mark_deprecated
def name_scope(name: str):
    """OneFlow's deprecated spelling of :func:`namespace` (exported as ``flow.name_scope``,
    ``flow.experimental.name_scope`` and ``flow.deprecated.variable_scope``): the same
    prefix, with a FutureWarning saying to use ``flow.scope.namespace``."""
    warnings.warn("flow.name_scope / flow.experimental.name_scope / "
                  "flow.deprecated.variable_scope will be removed (as in OneFlow): use "
                  "flow.scope.namespace", FutureWarning, stacklevel=user_stacklevel())
    return namespace(name)


# OneFlow's deprecated spelling of flow.current_scope() (which warns, as OneFlow's did).
from .engine.scope_desc import deprecated_current_scope as current_scope  # noqa: E402

from .engine.function_config import _view_stack