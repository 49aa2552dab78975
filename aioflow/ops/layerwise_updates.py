"""Update ops of the layer-wise adaptive optimizers (LAMB, LARS): each scales a
parameter's step by the ratio of the parameter's norm to its update's norm.

The norms stay on the device (``xp`` reductions, no host read); the learning rate and the
step counter are host scalars, as for the other update ops (see :mod:`.state`).
"""
from __future__ import annotations

from .registry import register
from .state import _guarded


def _update(name):
    return register(name, infer=lambda *inputs, **attrs: [], side_effect=True,
                    differentiable=False)


def _norm(xp, a):
    return xp.sqrt((a * a).sum())


@_update("lamb_update")
def lamb_update(ctx, param, grad, lr, m, v, step, *flag, beta1, beta2, epsilon):
    """Adam's bias-corrected direction ``r``, then ``w -= lr * (||w|| / ||r||) * r``
    (the ratio is 1 when either norm is 0). ``flag``: the step's non-finite guard."""
    xp = ctx.xp
    t = param.dtype.type
    n = float(step) + 1.0

    def update(param, m, v):
        m *= t(beta1)
        m += grad * t(1 - beta1)
        v *= t(beta2)
        v += grad * grad * t(1 - beta2)
        direction = (m * t(1 / (1 - beta1 ** n))) / (
            xp.sqrt(v * t(1 / (1 - beta2 ** n))) + t(epsilon))
        w_norm, r_norm = _norm(xp, param), _norm(xp, direction)
        ratio = xp.where((w_norm > 0) & (r_norm > 0),
                         w_norm / xp.where(r_norm > 0, r_norm, 1), t(1))
        param -= direction * (ratio * t(float(lr)))
    _guarded(ctx, flag, [param, m, v], update)


@_update("lars_update")
def lars_update(ctx, param, grad, lr, momentum, *flag, momentum_beta, epsilon,
                lars_coefficient):
    """OneFlow's LARS: ``local_lr = lr * coeff * ||w|| / (||g|| + epsilon)``;
    ``v = beta * v - local_lr * g``; ``w += v``. ``flag``: the step's non-finite guard."""
    xp = ctx.xp
    t = param.dtype.type

    def update(param, momentum):
        local_lr = (t(float(lr) * lars_coefficient) * _norm(xp, param)
                    / (_norm(xp, grad) + t(epsilon)))
        momentum *= t(momentum_beta)
        momentum -= grad * local_lr
        param += momentum
    _guarded(ctx, flag, [param, momentum], update)
