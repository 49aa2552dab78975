"""LAMB and LARS, OneFlow's layer-wise adaptive optimizers (re-exported by
``flow.optimizer``).

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> flow.clear_default_session()
>>> @flow.global_function(type="train")
... def fit(x: tp.Numpy.Placeholder((4, 1))) -> tp.Numpy:
...     w = flow.get_variable("w", shape=(1, 1), initializer=flow.ones_initializer())
...     loss = flow.math.reduce_mean(flow.math.square(flow.matmul(x, w) - 3 * x))
...     flow.optimizer.LAMB(0.1).minimize(loss)
...     return loss
>>> x = np.arange(4, dtype=np.float32).reshape(4, 1)
>>> first = float(fit(x)[0])
>>> for _ in range(30):
...     last = float(fit(x)[0])
>>> last < first / 100
True
"""
from __future__ import annotations

from ..ops import layerwise_updates as _ops

__all__ = ["LAMB", "LARS"]


def _base():
    from . import Optimizer, _check_unit
    return Optimizer, _check_unit


class LAMB(_base()[0]):
    """LAMB (You et al. 2019): Adam's bias-corrected step, scaled per variable by
    ``||w|| / ||step||`` (1 where either is 0). Slots ``<var>-m`` and ``<var>-v``."""

    def __init__(self, lr_scheduler, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 loss_scale_factor=None, grad_clipping=None, train_step_lbn=None,
                 loss_scale_policy=None, variables=None):
        super().__init__(lr_scheduler, variables=variables, grad_clipping=grad_clipping,
                         loss_scale_factor=loss_scale_factor,
                         loss_scale_policy=loss_scale_policy)
        from . import _set_moment_rates
        _set_moment_rates(self, beta1, beta2, epsilon)

    def update(self, param_name, param, grad, lr, step):
        _ops.lamb_update(param, grad, lr, self._slot(param_name, "m"),
                         self._slot(param_name, "v"), step, *self._guard(), beta1=self.beta1,
                         beta2=self.beta2, epsilon=self.epsilon)


class LARS(_base()[0]):
    """LARS (You et al. 2017) as OneFlow's kernel: a per-variable rate
    ``lr * lars_coefficient * ||w|| / (||g|| + epsilon)`` with momentum. As in OneFlow, a
    variable whose value is all zero gets a zero rate and does not move."""

    def __init__(self, lr_scheduler, momentum_beta=0.9, epsilon=1e-9, lars_coefficient=0.0001,
                 loss_scale_factor=None, grad_clipping=None, train_step_lbn=None,
                 loss_scale_policy=None, variables=None):
        super().__init__(lr_scheduler, variables=variables, grad_clipping=grad_clipping,
                         loss_scale_factor=loss_scale_factor,
                         loss_scale_policy=loss_scale_policy)
        _, check = _base()
        self.momentum_beta = check("LARS momentum_beta", momentum_beta)
        if not lars_coefficient > 0:
            raise ValueError(f"LARS lars_coefficient: expected a positive number, got "
                             f"{lars_coefficient!r}")
        self.epsilon = float(epsilon)
        self.lars_coefficient = float(lars_coefficient)

    def update(self, param_name, param, grad, lr, step):
        _ops.lars_update(param, grad, lr, self._slot(param_name, "momentum"),
                         *self._guard(), momentum_beta=self.momentum_beta, epsilon=self.epsilon,
                         lars_coefficient=self.lars_coefficient)
