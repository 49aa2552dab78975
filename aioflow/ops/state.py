"""Stateful ops: reading variables and updating them in place (optimizers, counters).

Update ops have ``side_effect=True`` and no outputs; the compiler keeps them and runs
them after every other op of the step, so all reads of a variable in a step see the
value from before the step (as in OneFlow and PyTorch).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from .registry import register


def _infer_variable(*, var, shape, dtype):
    return [(tuple(shape), dtype)]


@register("variable", infer=_infer_variable, differentiable=False)
def variable(ctx, *, var, shape, dtype):
    return ctx.variable(var)


def _no_outputs(*inputs, **attrs):
    return []


def _update(name):
    return register(name, infer=_no_outputs, side_effect=True, differentiable=False)


def _decayed(xp, param, grad, weight_decay):
    return grad if not weight_decay else grad + param * grad.dtype.type(weight_decay)


@_update("sgd_update")
def sgd_update(ctx, param, grad, lr, *, weight_decay=0.0):
    param -= _decayed(ctx.xp, param, grad, weight_decay) * param.dtype.type(lr)


@_update("momentum_update")
def momentum_update(ctx, param, grad, lr, velocity, *, beta, weight_decay=0.0):
    # OneFlow's form: v = beta * v - lr * g; param += v.
    velocity *= velocity.dtype.type(beta)
    velocity -= _decayed(ctx.xp, param, grad, weight_decay) * param.dtype.type(lr)
    param += velocity


@_update("adam_update")
def adam_update(ctx, param, grad, lr, m, v, step, *, beta1, beta2, epsilon,
                do_bias_correction, weight_decay=0.0):
    xp = ctx.xp
    t = param.dtype.type
    if weight_decay:  # decoupled (AdamW): w -= lr * decay * w, not scaled by Adam's terms
        param -= param * t(float(lr) * weight_decay)
    m *= t(beta1)
    m += grad * t(1 - beta1)
    v *= t(beta2)
    v += grad * grad * t(1 - beta2)
    if do_bias_correction:
        # As PyTorch and the Adam paper: epsilon is added to the *corrected* sqrt(v).
        n = float(step) + 1.0
        correction1, correction2 = 1 - beta1 ** n, (1 - beta2 ** n) ** 0.5
        update = m / (xp.sqrt(v) * t(1 / correction2) + t(epsilon))
        lr = float(lr) / correction1
    else:
        update = m / (xp.sqrt(v) + t(epsilon))
    param -= update * t(lr)


@_update("rmsprop_update")
def rmsprop_update(ctx, param, grad, lr, mean_square, *mean_grad, decay_rate, epsilon,
                   weight_decay=0.0):
    xp = ctx.xp
    t = param.dtype.type
    grad = _decayed(xp, param, grad, weight_decay)
    mean_square *= t(decay_rate)
    mean_square += grad * grad * t(1 - decay_rate)
    if mean_grad:  # centered: divide by an estimate of the variance instead
        mg, = mean_grad
        mg *= t(decay_rate)
        mg += grad * t(1 - decay_rate)
        denom = xp.sqrt(mean_square - mg * mg + t(epsilon))
    else:
        denom = xp.sqrt(mean_square + t(epsilon))
    param -= grad / denom * t(lr)


@_update("increment")
def increment(ctx, counter):
    counter += 1


def _infer_lr(step, *, schedule):
    return [((), dtypes.float64)]


@register("learning_rate", infer=_infer_lr, differentiable=False)
def learning_rate(ctx, step, *, schedule):
    # On the host on every backend: ``step`` is the job's step counter, a host variable
    # (VariableRecord.on_host), so the schedule never reads a device value; the update
    # kernels take the rate as a host scalar. float64, so float64 variables get the exact
    # rate; updates cast it to their dtype.
    return np.asarray(schedule.lr(int(step)), dtype=np.float64)


@_update("assign_moving_average")
def assign_moving_average(ctx, target, value, *, momentum):
    t = target.dtype.type
    target *= t(momentum)
    target += value * t(1 - momentum)
