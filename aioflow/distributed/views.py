"""OneFlow's two views of a job's data, over the devices of a world of ranks (each rank
runs one or several devices: :mod:`aioflow.distributed.devices`; the world's devices are
numbered rank by rank).

* Mirrored view (``tp.ListNumpy``): an argument is a list with one array per device of
  the world; device ``i`` computes on element ``i`` (each element has the placeholder's
  shape, or a smaller one: mirrored placeholders are dynamic). A ``tp.ListNumpy`` result
  is the list of every device's value, the same on every rank.
* Consistent view (``tp.Numpy``): a placeholder with a batch axis holds the logical
  batch; every rank passes the whole of it and each device computes on its slice (device
  ``i`` of ``N`` takes rows ``i*B/N`` to ``(i+1)*B/N`` along ``batch_axis``; the batch
  must divide by the devices). The job is traced with the slice's shape. Results come
  back as one device would give them for the whole batch
  (:mod:`aioflow.distributed.batch_split` says how, or refuses the job). A placeholder
  declared with ``batch_axis=None`` is passed whole to every device.
"""
from __future__ import annotations

import numpy as np

from .._core.describe import describe
from .batch_split import local_rows


def _splits(spec, devices) -> bool:
    return devices.world > 1 and spec.kind == "numpy" and spec.batch_axis is not None


def add_placeholder(graph, spec, name: str, job_name: str, devices):
    """The placeholder blob of ``spec`` for one device: a consistent-view placeholder with
    a batch axis gets a device's slice of the batch (``graph.split_axes`` records it)."""
    shape = spec.shape
    split = _splits(spec, devices)
    if split:
        axis = spec.batch_axis % len(shape)
        rows = local_rows(shape[axis], devices,
                          f"job function {job_name!r}, parameter {name!r}")
        shape = shape[:axis] + (rows,) + shape[axis + 1:]
    blob = graph.add_placeholder(shape, spec.dtype, name)
    if split:
        graph.split_axes = {**graph.split_axes, blob.id: axis}
    return blob


def device_parts(spec, array, devices) -> list:
    """What each device of this process computes on of a consistent-view argument: its
    slice of the batch (a private, contiguous copy), or the whole array for every device
    where nothing is split."""
    if not _splits(spec, devices):
        return [array] * devices.count
    axis = spec.batch_axis % array.ndim
    rows = array.shape[axis] // devices.world
    index = [slice(None)] * array.ndim
    parts = []
    for device in range(devices.first, devices.first + devices.count):
        index[axis] = slice(device * rows, (device + 1) * rows)
        parts.append(np.array(array[tuple(index)], order="C"))
    return parts


def device_elements(items, spec, name: str, fn_name: str, devices) -> list:
    """This process's elements of a mirrored argument, one per device (checks the list has
    one element per device of the world)."""
    if not isinstance(items, (list, tuple)) or len(items) != devices.world:
        raise TypeError(
            f"{fn_name}() argument {name!r}: {spec.kind} placeholder expects a list with "
            f"one array per device, {devices.describe()}; got {describe(items)}")
    return list(items[devices.first:devices.first + devices.count])


def output_kinds(template) -> list[str]:
    """The leaf kinds of a flattened result template, in output order."""
    kinds: dict[int, str] = {}

    def walk(node):
        if isinstance(node, tuple) and node and node[0] == "$":
            kinds[node[1]] = node[2]
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, (list, tuple)):
            for value in node:
                walk(value)
    walk(template)
    return [kinds[i] for i in sorted(kinds)]


def device_values(layout, arrays: list) -> list:
    """Each result leaf's value from a step's ``arrays`` and the ``layout`` that
    :func:`aioflow.distributed.graph_ops.gather_outputs` gave: for a mirrored (list) kind,
    the list of every device's array in world order (this process's outputs, one per
    device, each stacked over the ranks where there are several); else the one array."""
    ranks, leaves = layout
    values = []
    for leaf in leaves:
        if isinstance(leaf, tuple):
            parts = [arrays[i] for i in leaf]
            values.append([part[r] for r in range(ranks) for part in parts] if ranks > 1
                          else parts)
        else:
            values.append(arrays[leaf])
    return values
