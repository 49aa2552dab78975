"""Blobs with a data-dependent length along one axis (OneFlow's *dynamic* blobs).

aioflow plans static shapes only, so such a blob is its static maximum (the padded
array every op downstream sees) plus a size Blob of shape (1,) saying how much of one axis
is valid. :func:`mark` records the pair in the job's graph; when the job returns the blob,
the step hands back only the valid part (:func:`expose_sizes` at trace time,
:func:`trim` at delivery), as a OneFlow job returning a dynamic blob does.

Ops applied to a dynamic blob see the padded static shape; the size follows the blob only
through ``flow.sync_dynamic_resize`` (which sets it), ``flow.nonzero`` (argwhere's
transpose) and identities of it (``flow.identity`` does not carry it: ``cast_to_static_shape``
is how OneFlow drops it, and here every other op does so too).
"""
from __future__ import annotations

import numpy as np

from ..ir import Blob

__all__ = ["mark", "size_of", "expose_sizes", "trim"]


def mark(blob: Blob, size: Blob, axis: int = 0) -> Blob:
    """Record that only ``size[0]`` entries of ``blob`` along ``axis`` are valid."""
    blob.graph.dynamic_dims[blob.id] = (size, axis)
    return blob


def size_of(blob: Blob):
    """``(size Blob, axis)`` for a dynamic blob, else None."""
    return blob.graph.dynamic_dims.get(blob.id)


def expose_sizes(graph) -> tuple[tuple[int, int, int], ...]:
    """Append the size of every dynamic blob among ``graph.outputs`` to the outputs;
    returns ``(output index, size output index, axis)`` for :func:`trim`."""
    plan = []
    for index, blob in enumerate(list(graph.outputs)):
        entry = graph.dynamic_dims.get(blob.id)
        if entry is not None:
            size, axis = entry
            graph.outputs.append(size)
            plan.append((index, len(graph.outputs) - 1, axis))
    return tuple(plan)


def trim(plan, outputs: list) -> list:
    """The step's outputs with each dynamic one cut to its valid length."""
    if not plan:
        return outputs
    outputs = list(outputs)
    for index, size_index, axis in plan:
        valid = int(np.asarray(outputs[size_index]).reshape(-1)[0])
        cut = [slice(None)] * outputs[index].ndim
        cut[axis] = slice(0, valid)
        outputs[index] = outputs[index][tuple(cut)]
    return outputs
