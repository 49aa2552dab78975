"""Quantization-aware training ops, after OneFlow's CPU kernels: ``fake_quantization``
(quantize then dequantize), ``min_max_observer`` and ``moving_average_min_max_observer``
(the scale and zero point a tensor quantizes with).

Schemes: "symmetric" quantizes to signed integers of ``quantization_bit`` bits (zero point
0), "affine" to unsigned ones with a zero point. Formulas: "google" (a floating scale,
per layer or, for the min-max observer, per output channel = axis 0) and "cambricon" (a
power-of-two scale stored as its exponent, per layer only). Rounding is to the nearest
integer, halves to even (OneFlow sets ``FE_TONEAREST`` around ``std::nearbyint``).
"""
from __future__ import annotations

import numpy as np

from .registry import register, require_float

SCHEMES = ("symmetric", "affine")
FORMULAS = ("google", "cambricon")


def _t(x, value):
    return x.dtype.type(value)


# -- fake_quantization --------------------------------------------------------------------


def _infer_fake(x, scale, zero_point, *, quantization_bit, quantization_scheme,
                quantization_formula):
    require_float("fake_quantization", x, "input")
    if scale.size not in (1, x.shape[0] if x.ndim else 1) or zero_point.shape != scale.shape:
        raise ValueError(f"fake_quantization: scale and zero_point must both have shape (1,) "
                         f"or (input.shape[0],), got {scale.shape} and {zero_point.shape}")
    return [(x.shape, x.dtype)]


@register("fake_quantization", infer=_infer_fake)
def fake_quantization_op(ctx, x, scale, zero_point, *, quantization_bit,
                         quantization_scheme, quantization_formula):
    xp = ctx.xp
    if quantization_formula == "cambricon":
        # The scale holds the exponent of a power of two (truncated to an int, as C does).
        step = xp.power(_t(x, 2), xp.trunc(scale[:1])).astype(x.dtype)
        high = _t(x, 2 ** (quantization_bit - 1) - 1)
        return (xp.clip(xp.rint(x / step), -high - 1, high) * step).astype(x.dtype)
    channels = (x.shape[0],) + (1,) * (x.ndim - 1) if scale.size > 1 else (1,) * x.ndim
    step = scale.reshape(channels)
    if quantization_scheme == "symmetric":
        high = _t(x, 2 ** (quantization_bit - 1) - 1)
        return (xp.clip(xp.rint(x / step), -high - 1, high) * step).astype(x.dtype)
    # affine: the zero point is rounded half away from zero, then taken as a uint8.
    zp = xp.sign(zero_point) * xp.floor(xp.abs(zero_point) + _t(x, 0.5))
    zp = zp.astype(np.int64).astype(np.uint8).astype(x.dtype).reshape(channels)
    high = _t(x, 2 ** quantization_bit - 1)
    q = xp.clip(xp.rint(x / step + zp), _t(x, 0), high)
    return ((q - zp) * step).astype(x.dtype)


@fake_quantization_op.grad
def _fake_quantization_grad(node, gy):
    # Straight-through: rounding is taken as the identity (OneFlow's gradient too).
    return [gy, None, None]


# -- observers ----------------------------------------------------------------------------


def _scale_and_zero(xp, high, low, quantization_bit, quantization_scheme,
                    quantization_formula, *, round_zero=True):
    """scale and zero point from a max and a min (arrays of one dtype)."""
    t = high.dtype.type
    if quantization_formula == "cambricon":
        peak = xp.maximum(xp.abs(high), xp.abs(low))
        return (xp.floor(xp.log2(peak)) - t(quantization_bit - 2)).astype(high.dtype), \
            xp.zeros_like(high)
    if quantization_scheme == "symmetric":
        peak = xp.maximum(xp.abs(high), xp.abs(low))
        return (peak / t(2 ** (quantization_bit - 1) - 1)).astype(high.dtype), \
            xp.zeros_like(high)
    scale = ((high - low) / t(2 ** quantization_bit - 1)).astype(high.dtype)
    zero = -low / scale
    return scale, (-xp.rint(low / scale) if round_zero else zero).astype(high.dtype)


def _infer_observer(x, *, quantization_bit, quantization_scheme, quantization_formula,
                    per_layer_quantization):
    require_float("min_max_observer", x, "input")
    shape = (1,) if per_layer_quantization else (x.shape[0],)
    return [(shape, x.dtype), (shape, x.dtype)]


@register("min_max_observer", infer=_infer_observer, differentiable=False)
def min_max_observer_op(ctx, x, *, quantization_bit, quantization_scheme,
                        quantization_formula, per_layer_quantization):
    rows = x.reshape((1 if per_layer_quantization else x.shape[0], -1))
    return _scale_and_zero(ctx.xp, rows.max(axis=1), rows.min(axis=1), quantization_bit,
                           quantization_scheme, quantization_formula)


def _infer_moving(x, moving_max, moving_min, *, quantization_bit, quantization_scheme,
                  quantization_formula, momentum, training):
    require_float("moving_average_min_max_observer", x, "input")
    return [((1,), x.dtype)] * 4


@register("moving_average_min_max_observer", infer=_infer_moving, differentiable=False)
def moving_average_observer_op(ctx, x, moving_max, moving_min, *, quantization_bit,
                               quantization_scheme, quantization_formula, momentum,
                               training):
    """(scale, zero point, new moving max, new moving min): the moving values follow the
    input's max and min in train steps (starting from the first batch's, where they are
    still 0) and stay put otherwise."""
    xp = ctx.xp
    t = x.dtype.type
    new_max, new_min = moving_max.copy(), moving_min.copy()
    if training:
        high, low = x.max().reshape(1), x.min().reshape(1)
        weight = t(np.float32(momentum))     # a float attribute in OneFlow
        symmetric = quantization_formula == "cambricon" or quantization_scheme == "symmetric"
        if symmetric:
            high = xp.maximum(xp.abs(high), xp.abs(low))

        def follow(old, new):
            return xp.where(old == 0, new, old * weight + new * (t(1) - weight))
        new_max = follow(moving_max, high).astype(x.dtype)
        new_min = new_max if symmetric else follow(moving_min, low).astype(x.dtype)
    scale, zero = _scale_and_zero(xp, new_max, new_min, quantization_bit,
                                  quantization_scheme, quantization_formula, round_zero=False)
    return scale, zero, new_max, new_min.copy()


__all__ = ["fake_quantization_op", "min_max_observer_op", "moving_average_observer_op",
           "SCHEMES", "FORMULAS"]
