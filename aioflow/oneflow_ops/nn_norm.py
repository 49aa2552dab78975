"""``flow.nn.InstanceNorm1d/2d/3d`` and ``flow.nn.GroupNorm``: OneFlow v0.3.4's lazy-mode
functions (not PyTorch's module classes), composed from primitive ops.

As in OneFlow, every one of them is an instance norm over a 3-d view: InstanceNorm2d/3d
flatten the spatial axes, GroupNorm views ``(N, C, ...)`` as ``(N, num_groups, -1)``.
With ``affine=True`` the view's channels get variables ``<name>_gamma`` (ones) and
``<name>_beta`` (zeros) of shape ``(1, channels, 1)``; for GroupNorm the channels of the
view are the *groups*, so its affine parameters are per group (OneFlow's choice; PyTorch's
GroupNorm has one per channel).

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def norm(x: tp.Numpy.Placeholder((1, 2, 3))) -> tp.Numpy:
...     return flow.nn.InstanceNorm1d(x, affine=False)
>>> out = norm(np.array([[[1, 2, 3], [0, 0, 6]]], np.float32))
>>> np.round(out.astype(np.float64), 3).tolist()
[[[-1.225, 0.0, 1.225], [-0.707, -0.707, 1.414]]]
"""
from __future__ import annotations

from .. import initializers as init
from ..ir import Blob
from . import math_api as math
from .layers_api import _layer_name, _variable
from .nn_api import moments
from .ops_api import reshape

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "GroupNorm"]


def InstanceNorm1d(x, eps=1e-05, affine=True, name=None):  # noqa: N802 - OneFlow's name
    """Normalize each (sample, channel) row of a 3-d NCL ``x`` over its last axis."""
    return _instance_norm(x, 3, eps, affine, name, "InstanceNorm1D", "InstanceNorm1d")


def InstanceNorm2d(x, eps=1e-05, affine=True, name=None):  # noqa: N802
    """Instance norm of a 4-d NCHW ``x`` over H and W."""
    return _instance_norm(x, 4, eps, affine, name, "InstanceNorm2D", "InstanceNorm2d")


def InstanceNorm3d(x, eps=1e-05, affine=True, name=None):  # noqa: N802
    """Instance norm of a 5-d NCDHW ``x`` over D, H and W."""
    return _instance_norm(x, 5, eps, affine, name, "InstanceNorm3D", "InstanceNorm3d")


def GroupNorm(x, num_groups=32, eps=1e-05, affine=True, name=None):  # noqa: N802
    """Normalize each group of ``x.shape[1] // num_groups`` channels of an (N, C, ...)
    ``x`` (N >= 3 dims) over the group's channels and spatial positions."""
    _check_blob(x, "GroupNorm")
    if x.ndim < 3:
        raise ValueError(f"GroupNorm: x must have at least 3 dims (N, C, ...), got shape "
                         f"{x.shape}")
    if not isinstance(num_groups, int) or num_groups <= 0 or x.shape[1] % num_groups:
        raise ValueError(f"GroupNorm: num_groups must be a positive int dividing the "
                         f"{x.shape[1]} channels, got {num_groups!r}")
    return _normalize_view(x, (x.shape[0], num_groups, -1), eps, affine,
                           _name(name, "GroupNorm"))


def _check_blob(x, op_name):
    if not isinstance(x, Blob):
        raise TypeError(f"{op_name}: x must be a Blob, got {type(x).__name__}")


def _name(name, default):
    return _layer_name(name, default)


def _instance_norm(x, ndim, eps, affine, name, default_name, op_name):
    _check_blob(x, op_name)
    if x.ndim != ndim:
        raise ValueError(f"{op_name}: x must be {ndim}-d, got shape {x.shape}")
    return _normalize_view(x, (x.shape[0], x.shape[1], -1), eps, affine,
                           _name(name, default_name))


def _normalize_view(x, view, eps, affine, name):
    rows = reshape(x, view)
    mean, variance = moments(rows, [2], keepdims=True)
    out = math.divide(math.subtract(rows, mean), math.sqrt(math.add(variance, float(eps))))
    if affine:
        shape = (1, rows.shape[1], 1)
        gamma = _variable(f"{name}_gamma", shape, x.dtype, init.ones_initializer(), True)
        beta = _variable(f"{name}_beta", shape, x.dtype, init.zeros_initializer(), True)
        out = math.add(math.multiply(gamma, out), beta)
    return reshape(out, x.shape)
