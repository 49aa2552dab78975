"""The update op of ``flow.optimizer.LazyAdam``: Adam that leaves alone every element whose
gradient is zero in this step.

OneFlow's dense ``lazy_adam`` kernel skips each element with ``|g| < 1e-12``: its weight and
both moments keep their values (an embedding row no batch looked up is not decayed), and the
others take an Adam step with the bias correction folded into the rate,
``lr * sqrt(1 - beta2^t) / (1 - beta1^t)``, ``t`` the number of updates applied so far plus
one (OneFlow keeps ``beta1^t`` and ``beta2^t`` in two state variables; here they come from
the job's step counter, which counts the same updates: a skipped step counts neither).
"""
from __future__ import annotations

from .registry import register
from .state import _guarded

# Below this magnitude a gradient element counts as "not touched" (OneFlow's threshold).
UNTOUCHED = 1e-12


@register("lazy_adam_update", infer=lambda *inputs, **attrs: [], side_effect=True,
          differentiable=False)
def lazy_adam_update(ctx, param, grad, lr, m, v, step, *flag, beta1, beta2, epsilon):
    xp = ctx.xp
    t = param.dtype.type
    n = float(step) + 1.0
    rate = float(lr) * (1.0 - beta2 ** n) ** 0.5 / (1.0 - beta1 ** n)

    def update(param, m, v):
        touched = xp.abs(grad) >= t(UNTOUCHED)
        new_m = m * t(beta1) + grad * t(1 - beta1)
        new_v = v * t(beta2) + grad * grad * t(1 - beta2)
        new_param = param - new_m / (xp.sqrt(new_v) + t(epsilon)) * t(rate)
        for target, new in ((m, new_m), (v, new_v), (param, new_param)):
            xp.copyto(target, new, where=touched)
    _guarded(ctx, flag, [param, m, v], update)
