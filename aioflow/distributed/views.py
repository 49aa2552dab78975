"""OneFlow's two views of a job's data, in a world of several ranks.

* Mirrored view (``tp.ListNumpy``): an argument is a list with one array per rank;
  rank ``r`` computes on element ``r`` (each element has the placeholder's shape). A
  ``tp.ListNumpy`` result is the list of every rank's value, the same on every rank.
* Consistent view (``tp.Numpy``): a placeholder with a batch axis holds the logical
  batch; every rank passes the whole of it and computes on its slice (rank ``r`` takes
  rows ``r*B/N`` to ``(r+1)*B/N`` along ``batch_axis``; the batch must divide by the
  ranks). The job is traced with the slice's shape. Results come back as one process
  would give them (:mod:`aioflow.distributed.batch_split` says how, or refuses the job).
  A placeholder declared with ``batch_axis=None`` is passed whole to every rank.
"""
from __future__ import annotations

import numpy as np

from .._core.describe import describe
from .state import world
from .batch_split import local_rows


def add_placeholder(graph, spec, name: str, job_name: str):
    """The placeholder blob of ``spec``: a consistent-view placeholder with a batch axis
    gets this rank's slice of the batch (``graph.split_axes`` records it)."""
    current = world()
    shape = spec.shape
    split = current.distributed and spec.kind == "numpy" and spec.batch_axis is not None
    if split:
        axis = spec.batch_axis % len(shape)
        rows = local_rows(shape[axis], current.size,
                          f"job function {job_name!r}, parameter {name!r}")
        shape = shape[:axis] + (rows,) + shape[axis + 1:]
    blob = graph.add_placeholder(shape, spec.dtype, name)
    if split:
        graph.split_axes = {**graph.split_axes, blob.id: axis}
    return blob


def rank_part(spec, array):
    """This rank's slice of a consistent-view argument (a private, contiguous copy)."""
    current = world()
    if not (current.distributed and spec.kind == "numpy" and spec.batch_axis is not None):
        return array
    axis = spec.batch_axis % array.ndim
    rows = array.shape[axis] // current.size
    index = [slice(None)] * array.ndim
    index[axis] = slice(current.rank * rows, (current.rank + 1) * rows)
    return np.array(array[tuple(index)], order="C")


def rank_element(items, spec, name: str, fn_name: str):
    """This rank's element of a mirrored argument (checks there is one per rank)."""
    current = world()
    if not isinstance(items, (list, tuple)) or len(items) != current.size:
        raise TypeError(
            f"{fn_name}() argument {name!r}: {spec.kind} placeholder expects a list with "
            f"one array per rank ({current.size} rank{'s' if current.size > 1 else ''}), "
            f"got {describe(items)}")
    return items[current.rank]


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
