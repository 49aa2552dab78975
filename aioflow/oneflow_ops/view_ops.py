"""Ops that tell OneFlow's distributed runtime how to place or cast a blob, and AMP's
white-list marker. In one process they have nothing to do: each returns its input's value
(``amp_white_identity`` and ``parallel_cast`` as an identity op, with an identity
gradient; ``cast_to_current_logical_view`` the Blob itself).
"""
from __future__ import annotations

from .ops_api import _require_blob
from ..ops import elementwise as _ew

__all__ = ["amp_white_identity", "parallel_cast", "cast_to_current_logical_view"]



def amp_white_identity(x, name=None):
    """``x``: OneFlow's marker for automatic mixed precision (the ops around it may run in
    float16); aioflow has no automatic mixed precision, so it is an identity."""
    _require_blob(x, "amp_white_identity", "x")
    return _ew.identity(x, name=name)


def parallel_cast(input, name=None, distribute=None, gradient_distribute=None):  # noqa: A002
    """``input``: OneFlow sets its split/broadcast distribution across devices (and its
    gradient's); one process has one copy, so it is an identity."""
    _require_blob(input, "parallel_cast", "input")
    return _ew.identity(input, name=name)


def cast_to_current_logical_view(x):
    """``x`` itself: OneFlow converts between the consistent and mirrored views of a
    blob; a job in one process has one view."""
    _require_blob(x, "cast_to_current_logical_view", "x")
    return x
