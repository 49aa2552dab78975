"""Dynamic placeholders: OneFlow's mirrored inputs (``tp.ListNumpy.Placeholder``,
``flow.MirroredTensorDef``) take, per device, an array of the declared number of axes
holding at most the declared number of elements, and the job's ops see the array's
actual shape (OneFlow's ``MirroredTensorDef`` is ``is_dynamic``; ``input_blob_def.py``).

aioflow's plans are static (every buffer sized at compile time), so a call whose dynamic
arguments have another shape than the declared one runs a *variant* of the job: the job
function traced and compiled again with those shapes (cached per shape, sharing the
job's variables). Inside it every op sees the actual shape: reshape-like ops,
elementwise ops, reductions, matmul, concat, the losses, and ``minimize``, which scales
the model diffs by the loss's actual instance count as OneFlow does for a dynamic loss.
An op that cannot take the shape (a reshape to a fixed shape of the declared size, a
variable whose shape was derived from the input) fails with an error that names the
argument, its declared shape and the shape received.

``Blob.is_dynamic`` says whether a blob's shape follows such an input (or is a
data-dependent result, ``dynamic_shapes``); ``flow.cast_to_static_shape`` ends it.
"""
from __future__ import annotations

import numpy as np

__all__ = ["DYNAMIC_KINDS", "is_dynamic_spec", "fits_dynamic", "dynamic_leaves",
           "leaf_count", "for_devices", "variant_key", "VariantError"]

# Placeholder kinds OneFlow declares is_dynamic (tensor lists are dynamic by nature and
# handled as such by inputs.py).
DYNAMIC_KINDS = ("list_numpy",)


def is_dynamic_spec(spec) -> bool:
    return spec.kind in DYNAMIC_KINDS


def fits_dynamic(spec, shape: tuple) -> bool:
    """OneFlow's rule for a dynamic input: the same number of axes, no more elements."""
    return (len(shape) == len(spec.shape)
            and int(np.prod(shape, dtype=np.int64)) <= int(np.prod(spec.shape, dtype=np.int64)))


def dynamic_leaves(parameters) -> tuple[tuple[int, object, str], ...]:
    """``(index in a call's arrays, spec, argument name)`` of each dynamic placeholder."""
    leaves, index = [], 0

    def walk(spec, name):
        nonlocal index
        if isinstance(spec, tuple):
            for i, s in enumerate(spec):
                walk(s, f"{name}[{i}]")
            return
        if is_dynamic_spec(spec):
            leaves.append((index, spec, name))
        index += 1

    for param in parameters:
        walk(param.spec, param.name)
    return tuple(leaves)


def leaf_count(parameters) -> int:
    """How many arrays one device's call gives (a Tuple parameter gives several)."""
    def count(spec):
        return sum(count(s) for s in spec) if isinstance(spec, tuple) else 1
    return sum(count(p.spec) for p in parameters)


def for_devices(leaves, per_device: int, devices: int) -> tuple:
    """``leaves`` of one device, repeated for each of ``devices`` whose arrays follow one
    another in a call's arrays (``per_device`` each); device ``d``'s named so.

    >>> for_devices(((1, "spec", "x"),), 3, 2)
    ((1, 'spec', 'x'), (4, 'spec', 'x (device 1)'))
    """
    if devices == 1:
        return leaves
    return tuple((index + d * per_device, spec, f"{name} (device {d})" if d else name)
                 for d in range(devices) for index, spec, name in leaves)


def variant_key(leaves, arrays) -> tuple | None:
    """The actual shapes of the dynamic arguments when one differs from its declared
    shape (the key of the job's variant), else None (the job as declared)."""
    shapes = tuple(tuple(arrays[i].shape) for i, _, _ in leaves)
    if all(shape == spec.shape for shape, (_, spec, _) in zip(shapes, leaves)):
        return None
    return shapes


class VariantError(ValueError):
    """A job traced for dynamic arguments of another shape than declared failed."""

    @classmethod
    def wrap(cls, job_name: str, leaves, shapes, error: Exception) -> "VariantError":
        received = "; ".join(
            f"argument {name!r} declared {spec.shape}, got {shape}"
            for (_, spec, name), shape in zip(leaves, shapes) if shape != spec.shape)
        return cls(f"{job_name}: traced for the actual shapes of its dynamic (mirrored) "
                   f"arguments ({received}), an op cannot take them: "
                   f"{type(error).__name__}: {error}")
