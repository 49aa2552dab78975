"""OneFlow's ``oneflow/python/ops/transpose_util.py``: permutation helpers that its ops
(``top_k``, ``argsort``, ...) and its op tests import by module path
(``oneflow.python.ops.transpose_util``), not exported as ``flow.*`` names."""
from __future__ import annotations

from typing import Sequence

__all__ = ["is_perm", "get_perm_when_transpose_axis_to_last_dim", "get_inversed_perm"]


def is_perm(perm: Sequence[int]) -> bool:
    """Whether ``perm`` holds each of 0 .. len(perm) - 1 once."""
    return list(range(len(perm))) == sorted(perm)


def get_perm_when_transpose_axis_to_last_dim(num_axes: int, axis: int) -> tuple:
    """The permutation that moves ``axis`` (negative counts from the end) last, the other
    axes keeping their order."""
    axis = axis if axis >= 0 else axis + num_axes
    if not 0 <= axis < num_axes:
        raise ValueError(f"axis {axis} is out of range for {num_axes} axes")
    return tuple([dim if dim < axis else dim + 1 for dim in range(num_axes - 1)] + [axis])


def get_inversed_perm(perm: Sequence[int]) -> tuple:
    """The permutation that undoes ``perm``: ``transpose(transpose(x, perm), inverse)``
    is ``x``."""
    if not is_perm(perm):
        raise ValueError(f"{tuple(perm)} is not a permutation")
    inverse = [-1] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return tuple(inverse)
