"""OneFlow's micro-batch ops: ``repeat``, ``acc``, ``unpack`` and ``pack``.

In OneFlow they change an op's *time shape*: ``unpack(x, n)`` feeds the ops after it n
slices of ``x`` one after the other, ``pack`` concatenates such slices back, ``repeat(x,
n)`` hands the same ``x`` to n consecutive runs, and ``acc(y, n)`` sums n consecutive
runs' ``y`` into one. aioflow runs every op once per step on whole arrays, so:

* ``repeat`` is the identity and ``acc`` of a repeated value is that value times n: the
  n runs would all see the same value, and their sum is exactly that;
* ``unpack`` and ``pack`` are identities: the micro-batches run as one batch, which gives
  OneFlow's result for ops that treat samples independently (they warn once, since ops
  that mix samples, such as batch statistics, see the whole batch instead);
* ``acc`` of anything computed from an unpacked blob (before it is packed) raises
  ``NotImplementedError``: its micro-batch sums are not formed here.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
...     return flow.acc(flow.repeat(x, 3) * 2, 3)
>>> job(np.array([1.0, 2.0], np.float32)).tolist()
[6.0, 12.0]
"""
from __future__ import annotations

import numbers

from .._core.warn import warn_once
from ..ir import Blob
from .ops_api import _require_blob
from ..ops import elementwise as _ew

__all__ = ["repeat", "acc", "unpack", "pack"]


def _check(op_name, blob, count, arg):
    _require_blob(blob, op_name, "input")
    if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 1:
        raise ValueError(f"{op_name}: {arg} must be a positive int, got {count!r}")
    return int(count)


def _tag(blob: Blob, kind: str) -> Blob:
    blob.graph.micro_batches[blob.id] = kind
    return blob


def repeat(input, repeat_num, name=None):  # noqa: A002 - OneFlow's names
    """``input`` for each of ``repeat_num`` runs: the identity (see the module doc)."""
    _check("repeat", input, repeat_num, "repeat_num")
    return _tag(_ew.identity(input, name=name), "repeat")


def unpack(input, unpack_num, name=None):  # noqa: A002
    """``input`` split into ``unpack_num`` micro-batches along axis 0, run here as one
    batch: the identity (see the module doc)."""
    count = _check("unpack", input, unpack_num, "unpack_num")
    if not input.shape or input.shape[0] % count:
        raise ValueError(f"unpack: axis 0 of input ({input.shape}) must divide into "
                         f"{count} micro-batches")
    _warn_whole_batch("unpack")
    return _tag(_ew.identity(input, name=name), "unpack")


def pack(input, pack_num, name=None):  # noqa: A002
    """The ``pack_num`` micro-batches of an unpacked blob concatenated back: the
    identity here, since they never were split (see the module doc)."""
    _check("pack", input, pack_num, "pack_num")
    _warn_whole_batch("pack")
    return _tag(_ew.identity(input, name=name), "pack")


def acc(one, max_acc_num, name=None):
    """The sum of ``max_acc_num`` runs of ``one``: ``one * max_acc_num`` for a value of
    repeated runs (see the module doc)."""
    count = _check("acc", one, max_acc_num, "max_acc_num")
    if _from_unpacked(one):
        raise NotImplementedError(
            "acc: its input is computed from flow.unpack's micro-batches; aioflow runs them "
            "as one batch and does not form per-micro-batch sums (pack them with flow.pack "
            "instead)")
    return _ew.multiply_op(one, _ew.scalar_like(count, one), name=name)


def _from_unpacked(blob: Blob) -> bool:
    """Whether ``blob`` depends on an unpacked blob through no pack."""
    tags = blob.graph.micro_batches
    seen, todo = set(), [blob]
    while todo:
        current = todo.pop()
        if current.id in seen or tags.get(current.id) == "pack":
            continue
        seen.add(current.id)
        if tags.get(current.id) == "unpack":
            return True
        if current.producer is not None:
            todo.extend(current.producer.inputs)
    return False


def _warn_whole_batch(op_name):
    warn_once(f"micro_batch.{op_name}",
              f"flow.{op_name}: aioflow runs the micro-batches of flow.unpack / flow.pack as "
              "one batch (the same result for ops that treat samples independently)")
