"""``flow.quantization``: quantization-aware training as OneFlow v0.3.4 offers it.

``min_max_observer`` and ``moving_average_min_maxObserver`` give the scale and zero point
a tensor quantizes with; ``fake_quantization`` quantizes and dequantizes with them (its
gradient passes straight through). Formulas, after OneFlow's kernels (b =
``quantization_bit``, rounding halves to even):

* google, symmetric: ``scale = max(|max|, |min|) / (2^(b-1) - 1)``, zero point 0, and
  ``clip(round(x / scale), -2^(b-1), 2^(b-1) - 1) * scale``;
* google, affine: ``scale = (max - min) / (2^b - 1)``, ``zero_point = -round(min /
  scale)`` (the moving observer does not round it), and ``(clip(round(x / scale + zp), 0,
  2^b - 1) - zp) * scale`` with ``zp`` the zero point rounded and taken as a uint8;
* cambricon (symmetric, per layer): the scale is an exponent, ``floor(log2(max(|max|,
  |min|))) - (b - 2)``, and values quantize with the step ``2^int(scale)``.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def job(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
...     scale, zero_point = flow.quantization.min_max_observer(x, quantization_bit=4)
...     return flow.quantization.fake_quantization(x, scale, zero_point, quantization_bit=4)
>>> job(np.array([-0.7, 0.05, 0.31, 0.7], np.float32)).tolist()
[-0.699999988079071, 0.0, 0.30000001192092896, 0.699999988079071]
"""
from __future__ import annotations

import numbers

from .oneflow_ops.ops_api import _require_blob
from .ops import quantize as _q
from .oneflow_ops.assign_api import assign
from ._core.dtypes import int64
from .initializers import zeros_initializer
from .ir import current_graph
from .engine.variables import get_variable

__all__ = ["fake_quantization", "min_max_observer", "moving_average_min_maxObserver"]


def _check(op_name, x, bit, scheme, formula):
    _require_blob(x, op_name, "input")
    if isinstance(bit, bool) or not isinstance(bit, numbers.Integral) or not 2 <= bit <= 8:
        raise ValueError(f"{op_name}: quantization_bit must be an int in [2, 8], got {bit!r}")
    if scheme not in _q.SCHEMES:
        raise ValueError(f"{op_name}: quantization_scheme must be one of {_q.SCHEMES}, got "
                         f"{scheme!r}")
    if formula not in _q.FORMULAS:
        raise ValueError(f"{op_name}: quantization_formula must be one of {_q.FORMULAS}, "
                         f"got {formula!r}")
    return dict(quantization_bit=int(bit), quantization_scheme=scheme,
                quantization_formula=formula)


def min_max_observer(input, quantization_bit=8, quantization_scheme="symmetric",  # noqa: A002
                     quantization_formula="google", per_layer_quantization=True, name=None):
    """``(scale, zero_point)`` of ``input`` from its max and min: shape (1,), or
    ``(input.shape[0],)`` per channel with ``per_layer_quantization=False``."""
    attrs = _check("min_max_observer", input, quantization_bit, quantization_scheme,
                   quantization_formula)
    if quantization_formula == "cambricon" and not per_layer_quantization:
        raise NotImplementedError("min_max_observer: per-channel mode is not supported in "
                                  "the cambricon formula (nor in OneFlow)")
    return _q.min_max_observer_op(input, per_layer_quantization=bool(per_layer_quantization),
                                  name=name, **attrs)


def moving_average_min_maxObserver(input, quantization_bit=8,  # noqa: A002,N802 - OneFlow's
                                   quantization_scheme="symmetric",
                                   quantization_formula="google", momentum=0.95, name=None):
    """``(scale, zero_point)`` (shape (1,)) from moving averages of ``input``'s max and
    min, kept in the variables ``<name>-moving_max`` and ``<name>-moving_min`` (and
    OneFlow's ``<name>-current_train_step``, kept at 0 as OneFlow leaves it). In a train
    job they move each step, ``moving = moving * momentum + value * (1 - momentum)``,
    starting from the first batch's value; in a predict job they stay put. The symmetric
    and cambricon forms follow ``max(|max|, |min|)`` and keep both variables equal."""
    attrs = _check("moving_average_min_maxObserver", input, quantization_bit,
                   quantization_scheme, quantization_formula)
    graph = current_graph()
    name = name or graph.unique_name("MovingAverageMinMaxObserver")
    moving_max, moving_min = (
        get_variable(f"{name}-{which}", shape=(1,), dtype=input.dtype,
                     initializer=zeros_initializer(), trainable=False)
        for which in ("moving_max", "moving_min"))
    get_variable(f"{name}-current_train_step", shape=(1,), dtype=int64,
                 initializer=zeros_initializer(), trainable=False)
    scale, zero_point, new_max, new_min = _q.moving_average_observer_op(
        input, moving_max, moving_min, momentum=float(momentum),
        training=graph.job_type == "train", name=name, **attrs)
    if graph.job_type == "train":
        assign(moving_max, new_max)
        assign(moving_min, new_min)
    return scale, zero_point


def fake_quantization(input, scale, zero_point, quantization_bit=8,  # noqa: A002
                      quantization_scheme="symmetric", quantization_formula="google",
                      name=None):
    """``input`` quantized with ``scale`` and ``zero_point`` (from an observer) and
    dequantized again; per channel (axis 0) when they hold one value per channel."""
    attrs = _check("fake_quantization", input, quantization_bit, quantization_scheme,
                   quantization_formula)
    _require_blob(scale, "fake_quantization", "scale")
    _require_blob(zero_point, "fake_quantization", "zero_point")
    return _q.fake_quantization_op(input, scale, zero_point, name=name, **attrs)
