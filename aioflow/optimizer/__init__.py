"""Optimizers with OneFlow's signatures and update rules; ``minimize(loss)`` inside a train job.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> flow.clear_default_session()
>>> @flow.global_function(type="train")
... def fit(x: tp.Numpy.Placeholder((4, 1)), y: tp.Numpy.Placeholder((4, 1))) -> tp.Numpy:
...     w = flow.get_variable("w", shape=(1, 1), initializer=flow.zeros_initializer())
...     loss = flow.math.square(flow.matmul(x, w) - y)
...     flow.optimizer.SGD(0.1, momentum=0).minimize(loss)  # per-sample loss: trains its mean
...     return loss
>>> x = np.arange(4, dtype=np.float32).reshape(4, 1)
>>> for _ in range(50):
...     _ = fit(x, 3 * x)
>>> round(float(flow.get_all_variables()["w"][0, 0]), 3)
3.0

Update rules (``g`` the gradient, ``lr`` the scheduled rate):

* ``SGD``: ``v = momentum * v - lr * g; w += v`` (``momentum=0``: ``w -= lr * g``).
* ``Adam``: ``m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; w -= lr * m / (sqrt(v) + eps)``;
  with ``do_bias_correction`` (OneFlow's default is False) ``m`` and ``v`` are divided by
  ``1-b1^t`` and ``1-b2^t`` first, as in PyTorch (OneFlow added ``eps`` before correcting,
  a difference that shows only while ``sqrt(v)`` is near ``eps``).
* ``AdamW``: ``w -= lr_t * weight_decay * w`` (decoupled), then Adam; ``lr_t`` is ``lr``,
  or with ``do_bias_correction`` OneFlow's ``lr * sqrt(1-b2^t) / (1-b1^t)``.
* ``RMSProp``: ``s = d s + (1-d) g^2; w -= lr * g / sqrt(s + eps)`` (centered: ``s - mg^2``).
"""
from __future__ import annotations

from .._core import settings
from .._core import dtypes
from .._core.system_names import train_step_name
from ..oneflow_ops import ops_api
from . import loss_scale
from ..compiler.autodiff import gradients, model_diff_scale
from ..distributed import graph_ops
from ..ir import current_graph
from ..ops import state as state_ops
from ..ops.lazy_adam import lazy_adam_update
from .gathered_rows import gathered_rows
from ..ops.layerwise_updates import lamb_update, lars_update
from ..engine.variables import read_declared
from ..initializers import zeros_initializer
from .schedulers import (ConstantWarmup, CosineScheduler, ExponentialScheduler,  # noqa: F401
                         InverseTimeScheduler, LinearCosineScheduler, LinearWarmup,
                         LrScheduler, NaturalExpScheduler, PiecewiseConstantScheduler,
                         PiecewiseScalingScheduler, PolynomialSchduler, PolynomialScheduler,
                         as_scheduler, warmup)
from .custom_scheduler import CustomScheduler
from . import grad_clipping  # noqa: F401 - flow.optimizer.grad_clipping.by_global_norm


__all__ = [
    "Optimizer",
    "SGD",
    "SGDW",
    "Adam",
    "AdamW",
    "LazyAdam",
    "RMSProp",
    "CustomScheduler",
    "loss_scale",
    "PiecewiseConstantScheduler",
    "PiecewiseScalingScheduler",
    "CosineScheduler",
    "PolynomialScheduler",
    "PolynomialSchduler",
    "LinearCosineScheduler",
    "ExponentialScheduler",
    "InverseTimeScheduler",
    "NaturalExpScheduler",
    "LinearWarmup",
    "ConstantWarmup",
    "LrScheduler",
    "warmup",
    "grad_clipping",
    "LAMB",
    "LARS",
]


# The suffixes of optimizer slot variables (``<variable>-<slot>``), across optimizers.
SLOT_NAMES = frozenset({"momentum", "m", "v", "mean_square", "mean_gradient"})


class Optimizer:
    """Base: holds the learning-rate schedule; ``minimize(loss)`` marks the job's target."""

    slots: tuple[str, ...] = ()
    # While build_training adds the updates: the step's non-finite flag, passed to each.
    guard = None
    # Weight decay (SGDW, AdamW) and the substrings of the names of the variables that get
    # it (includes) or do not (excludes); None: every variable.
    weight_decay = 0.0
    decay_includes = decay_excludes = None

    def __init__(self, lr_scheduler, *, variables=None, grad_clipping=None,
                 loss_scale_factor=None, train_step_lbn=None, loss_scale_policy=None):
        self.schedule = as_scheduler(lr_scheduler)
        self.variables = variables
        if grad_clipping is not None and not callable(getattr(grad_clipping, "clip", None)):
            raise TypeError("grad_clipping: expected flow.optimizer.grad_clipping.by_global_norm"
                            f"(...), got {grad_clipping!r}")
        self.grad_clipping = grad_clipping
        self.loss_scale_policy = loss_scale.resolve(type(self).__name__, loss_scale_factor,
                                                    loss_scale_policy)

    def minimize(self, loss) -> None:
        """Train the job's variables to reduce ``loss`` (averaged if it is not a scalar)."""
        graph = current_graph()
        if graph.train_target is not None:
            raise RuntimeError(f"job {graph.name!r}: minimize() may be called once per job")
        graph.train_target = (self, [loss])
        graph.training_pass = build_training

    def update(self, param_name, param, grad, lr, step) -> None:  # pragma: no cover
        raise NotImplementedError

    def _set_weight_decay(self, weight_decay, includes, excludes) -> None:
        if includes is not None and excludes is not None:
            raise ValueError(f"{type(self).__name__}: give weight_decay_includes or "
                             "weight_decay_excludes, not both")
        self.weight_decay = float(weight_decay or 0.0)
        # A single name is a list of one, as in OneFlow.
        self.decay_includes = [includes] if isinstance(includes, str) else includes
        self.decay_excludes = [excludes] if isinstance(excludes, str) else excludes

    def _decay(self, param_name: str) -> float:
        """The weight decay of the variable ``param_name``."""
        if self.decay_includes is not None and not any(
                p in param_name for p in self.decay_includes):
            return 0.0
        if self.decay_excludes is not None and any(p in param_name for p in self.decay_excludes):
            return 0.0
        return self.weight_decay

    def _row_sparse(self, param_name: str, param, grad) -> tuple[tuple, dict]:
        """(extra inputs, attributes) of an sgd, momentum or adam update op for
        ``function_config.indexed_slices_optimizer_conf``: a listed variable's update
        touches only the rows with a gradient this step (OneFlow rewrites it to an
        indexed-slices update of the rows the step gathered; aioflow tells them by their
        gradient), weight decay and momentum included. An embedding's gradient brings the
        gathers' indices (before the step's flag), so that the update computes on the rows
        they name instead of searching the whole table for them (``ops/row_updates.py``)."""
        if not self._sparse_rows(param_name):
            return (), {"sparse_rows": False}
        rows = gathered_rows(grad, param.shape) or []
        return tuple(rows), {"sparse_rows": True, "row_hints": len(rows)}

    def _sparse_rows(self, param_name: str) -> bool:
        """Whether ``function_config.indexed_slices_optimizer_conf`` lists the variable."""
        config = current_graph().config
        conf = config.setting("indexed_slices_optimizer_conf") if config is not None else None
        if not conf or conf.get("enable") is False:
            return False
        listed = conf.get("include_op_names", {}).get("op_name", [])
        excluded = conf.get("exclude_op_names", {}).get("op_name", [])
        return param_name in listed and param_name not in excluded

    def _guard(self) -> tuple:
        """The extra input of an update op: the step's non-finite flag, if any."""
        return () if self.guard is None else (self.guard,)

    def _slot(self, param_name: str, slot: str):
        """A zero-initialized optimizer state variable named ``<param>-<slot>``."""
        graph = current_graph()
        record = graph.session.variables[param_name]
        name = f"{param_name}-{slot}"
        graph.session.declare_variable(name, record.shape, record.dtype, zeros_initializer(),
                                       False, graph, is_state=True)
        return read_declared(name)

    def _selected(self, names):
        if self.variables is None:
            return names
        wanted = self.variables() if callable(self.variables) else self.variables
        unknown = [n for n in wanted if n not in names]
        if unknown:
            raise ValueError(f"optimizer variables: {unknown} are not trainable variables of "
                             f"this job (it has {sorted(names)})")
        return [n for n in names if n in set(wanted)]


def _check_unit(name, value):
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name}: expected a value in [0, 1), got {value!r}")
    return float(value)


def _set_moment_rates(optimizer, beta1, beta2, epsilon) -> None:
    """Check and keep the constants of the Adam family (Adam, LazyAdam, LAMB)."""
    owner = type(optimizer).__name__
    optimizer.beta1 = _check_unit(f"{owner} beta1", beta1)
    optimizer.beta2 = _check_unit(f"{owner} beta2", beta2)
    if not epsilon > 0:
        raise ValueError(f"{owner} epsilon: expected a positive number, got {epsilon!r}")
    optimizer.epsilon = float(epsilon)


class SGD(Optimizer):
    """Stochastic gradient descent; note OneFlow's default ``momentum=0.9``."""

    def __init__(self, lr_scheduler, loss_scale_factor=None, momentum=0.9, grad_clipping=None,
                 train_step_lbn=None, loss_scale_policy=None, variables=None):
        super().__init__(lr_scheduler, variables=variables, grad_clipping=grad_clipping,
                         loss_scale_factor=loss_scale_factor,
                         loss_scale_policy=loss_scale_policy)
        self.momentum = _check_unit("SGD momentum", momentum)

    def update(self, param_name, param, grad, lr, step):
        rows, sparse = self._row_sparse(param_name, param, grad)
        if self.momentum == 0.0:
            state_ops.sgd_update(param, grad, lr, *rows, *self._guard(),
                                 weight_decay=self._decay(param_name), **sparse)
        else:
            state_ops.momentum_update(param, grad, lr, self._slot(param_name, "momentum"),
                                      *rows, *self._guard(), beta=self.momentum,
                                      weight_decay=self._decay(param_name), **sparse)


class SGDW(SGD):
    """SGD with weight decay added to the gradient (only for the variables whose names
    contain one of ``weight_decay_includes``, or none of ``weight_decay_excludes``)."""

    def __init__(self, lr_scheduler, loss_scale_factor=None, momentum=0.9, weight_decay=None,
                 weight_decay_includes=None, weight_decay_excludes=None, grad_clipping=None,
                 train_step_lbn=None, loss_scale_policy=None, variables=None):
        super().__init__(lr_scheduler, loss_scale_factor, momentum, grad_clipping,
                         train_step_lbn, loss_scale_policy, variables)
        self._set_weight_decay(weight_decay, weight_decay_includes, weight_decay_excludes)


class Adam(Optimizer):
    """Adam; OneFlow's default ``do_bias_correction=False``."""

    def __init__(self, lr_scheduler, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 do_bias_correction=False, loss_scale_factor=None, grad_clipping=None,
                 train_step_lbn=None, loss_scale_policy=None, variables=None):
        super().__init__(lr_scheduler, variables=variables, grad_clipping=grad_clipping,
                         loss_scale_factor=loss_scale_factor,
                         loss_scale_policy=loss_scale_policy)
        _set_moment_rates(self, beta1, beta2, epsilon)
        self.do_bias_correction = bool(do_bias_correction)

    def update(self, param_name, param, grad, lr, step):
        rows, sparse = self._row_sparse(param_name, param, grad)
        state_ops.adam_update(
            param, grad, lr, self._slot(param_name, "m"), self._slot(param_name, "v"), step,
            *rows, *self._guard(), beta1=self.beta1, beta2=self.beta2, epsilon=self.epsilon,
            do_bias_correction=self.do_bias_correction, weight_decay=self._decay(param_name),
            **sparse)


class AdamW(Adam):
    """Adam with decoupled weight decay."""

    def __init__(self, lr_scheduler, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 do_bias_correction=False, loss_scale_factor=None, weight_decay=None,
                 weight_decay_includes=None, weight_decay_excludes=None, grad_clipping=None,
                 train_step_lbn=None, loss_scale_policy=None, variables=None):
        super().__init__(lr_scheduler, beta1, beta2, epsilon, do_bias_correction,
                         loss_scale_factor, grad_clipping, train_step_lbn, loss_scale_policy,
                         variables)
        self._set_weight_decay(weight_decay, weight_decay_includes, weight_decay_excludes)


class LazyAdam(Optimizer):
    """Adam that updates only the elements whose gradient is not zero this step (OneFlow's
    ``lazy_adam``): an element with ``|g| < 1e-12`` keeps its weight and both moments (an
    embedding row no batch looked up is not decayed); the others take an Adam step with
    bias correction, ``lr * sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + epsilon)``.
    Slots ``<var>-m`` and ``<var>-v``.

    >>> import numpy as np, aioflow as flow, aioflow.typing as tp
    >>> flow.clear_default_session()
    >>> @flow.global_function(type="train")
    ... def fit(ids: tp.Numpy.Placeholder((2,), dtype=flow.int32)) -> tp.Numpy:
    ...     table = flow.get_variable("table", shape=(4, 2), initializer=flow.ones_initializer())
    ...     loss = flow.math.reduce_sum(flow.gather(table, ids))
    ...     flow.optimizer.LazyAdam(0.1).minimize(loss)
    ...     return loss
    >>> _ = fit(np.array([0, 2], np.int32))
    >>> flow.get_all_variables()["table"][:, 0].astype(float).round(3).tolist()  # 1, 3 untouched
    [0.9, 1.0, 0.9, 1.0]
    """

    def __init__(self, lr_scheduler, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 loss_scale_factor=None, grad_clipping=None, train_step_lbn=None,
                 loss_scale_policy=None, variables=None):
        super().__init__(lr_scheduler, variables=variables, grad_clipping=grad_clipping,
                         loss_scale_factor=loss_scale_factor,
                         loss_scale_policy=loss_scale_policy)
        _set_moment_rates(self, beta1, beta2, epsilon)

    def update(self, param_name, param, grad, lr, step):
        # An embedding's gradient: the gathers' indices go with it, so that the update
        # computes on the rows they name instead of searching the whole table for them.
        rows = gathered_rows(grad, param.shape) or []
        lazy_adam_update(param, grad, lr, self._slot(param_name, "m"),
                         self._slot(param_name, "v"), step, *rows, *self._guard(),
                         beta1=self.beta1, beta2=self.beta2, epsilon=self.epsilon,
                         row_hints=len(rows))


class RMSProp(Optimizer):
    """RMSProp: ``w -= lr * g / sqrt(mean_square + epsilon)``."""

    def __init__(self, lr_scheduler, decay_rate=0.99, epsilon=1e-8, centered=False,
                 loss_scale_factor=None, grad_clipping=None, train_step_lbn=None,
                 loss_scale_policy=None, variables=None):
        super().__init__(lr_scheduler, variables=variables, grad_clipping=grad_clipping,
                         loss_scale_factor=loss_scale_factor,
                         loss_scale_policy=loss_scale_policy)
        self.decay_rate = _check_unit("RMSProp decay_rate", decay_rate)
        self.epsilon = float(epsilon)
        self.centered = bool(centered)

    def update(self, param_name, param, grad, lr, step):
        slots = [self._slot(param_name, "mean_square")]
        if self.centered:
            slots.append(self._slot(param_name, "mean_gradient"))
        state_ops.rmsprop_update(param, grad, lr, *slots, *self._guard(),
                                 decay_rate=self.decay_rate, epsilon=self.epsilon,
                                 guarded=self.guard is not None)


# -- OneFlow's layer-wise adaptive optimizers (issue 18) ------------------------------------


class LAMB(Optimizer):
    """LAMB (You et al. 2019): Adam's bias-corrected step, scaled per variable by
    ``||w|| / ||step||`` (1 where either is 0). Slots ``<var>-m`` and ``<var>-v``.

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

    def __init__(self, lr_scheduler, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 loss_scale_factor=None, grad_clipping=None, train_step_lbn=None,
                 loss_scale_policy=None, variables=None):
        super().__init__(lr_scheduler, variables=variables, grad_clipping=grad_clipping,
                         loss_scale_factor=loss_scale_factor,
                         loss_scale_policy=loss_scale_policy)
        _set_moment_rates(self, beta1, beta2, epsilon)

    def update(self, param_name, param, grad, lr, step):
        lamb_update(param, grad, lr, self._slot(param_name, "m"), self._slot(param_name, "v"),
                    step, *self._guard(), beta1=self.beta1, beta2=self.beta2,
                    epsilon=self.epsilon)


class LARS(Optimizer):
    """LARS (You et al. 2017) as OneFlow's kernel: a per-variable rate
    ``lr * lars_coefficient * ||w|| / (||g|| + epsilon)`` with momentum. As in OneFlow, a
    variable whose value is all zero gets a zero rate and does not move."""

    def __init__(self, lr_scheduler, momentum_beta=0.9, epsilon=1e-9, lars_coefficient=0.0001,
                 loss_scale_factor=None, grad_clipping=None, train_step_lbn=None,
                 loss_scale_policy=None, variables=None):
        super().__init__(lr_scheduler, variables=variables, grad_clipping=grad_clipping,
                         loss_scale_factor=loss_scale_factor,
                         loss_scale_policy=loss_scale_policy)
        self.momentum_beta = _check_unit("LARS momentum_beta", momentum_beta)
        if not lars_coefficient > 0:
            raise ValueError(f"LARS lars_coefficient: expected a positive number, got "
                             f"{lars_coefficient!r}")
        self.epsilon = float(epsilon)
        self.lars_coefficient = float(lars_coefficient)

    def update(self, param_name, param, grad, lr, step):
        lars_update(param, grad, lr, self._slot(param_name, "momentum"), *self._guard(),
                    momentum_beta=self.momentum_beta, epsilon=self.epsilon,
                    lars_coefficient=self.lars_coefficient)


def _legacy_optimizer(config):
    """Old API: ``config.train.primary_lr`` + ``model_update_conf``."""
    lr = config.train.primary_lr()
    conf = config.train.model_update_conf() or {"naive_conf": {}}
    if lr is None:
        raise RuntimeError("flow.losses.add_loss() needs config.train.primary_lr(lr) in the "
                           "job's function_config")
    (kind, options), = conf.items()
    options = dict(options or {})
    scale = config.setting("train.loss_scale_factor")   # OneFlow's old loss scale
    if kind == "naive_conf":
        return SGD(lr, momentum=0.0, loss_scale_factor=scale)
    if kind == "momentum_conf":
        return SGD(lr, momentum=options.get("beta", 0.9), loss_scale_factor=scale)
    if kind == "adam_conf":
        return Adam(lr, beta1=options.get("beta1", 0.9), beta2=options.get("beta2", 0.999),
                    epsilon=options.get("epsilon", 1e-8),
                    do_bias_correction=options.get("do_bias_correction", False),
                    loss_scale_factor=scale)
    return RMSProp(lr, decay_rate=options.get("decay_rate", 0.99),
                   epsilon=options.get("epsilon", 1e-8), loss_scale_factor=scale)


def build_training(graph) -> None:
    """Append gradient and update ops for the job's optimizer target (called after tracing)."""
    if graph.train_target is not None:
        # OneFlow's minimize() adds its losses to the job's loss list, as add_loss() does:
        # both in one job train on every loss; one blob given to both counts once.
        optimizer, losses = graph.train_target
        seen = {loss.id for loss in losses}
        losses = list(losses) + [x for x in graph.legacy_losses
                                 if x.id not in seen and not seen.add(x.id)]
    elif graph.legacy_losses:
        optimizer, losses = _legacy_optimizer(graph.config), graph.legacy_losses
    else:
        raise RuntimeError(f"train job {graph.name!r} has no training target: call "
                           "flow.optimizer.SGD(...).minimize(loss) (or flow.losses.add_loss) "
                           "inside it, or declare it with type='predict'")
    session = graph.session
    names = [n for n in graph.variable_blobs
             if graph.variable_trainable.get(n, session.variables[n].trainable)]
    names = optimizer._selected(names)
    params = [graph.variable_blobs[n] for n in names]

    watched = [blob for kind, blob, _ in graph.watches if kind == "diff"]

    def summed_gradients(loss_list):
        """(model diffs by blob id, watched diffs by blob id), summed over the losses.

        As OneFlow: each loss's diff is seeded with ones; the model diffs alone are then
        scaled by 1/(that loss's instance count), the watched ones are reported as they
        are (a watched variable too)."""
        model: dict[int, object] = {}
        seen: dict[int, object] = {}
        for loss in loss_list:
            raw = gradients(graph, loss, params + watched)
            scale = model_diff_scale(loss)
            # (the watched diffs of a job of several devices are device 0's part's:
            # aioflow/distributed/devices.py)
            for blob_id, grad in ({} if loss.id in graph.other_devices else raw).items():
                seen[blob_id] = grad if blob_id not in seen else seen[blob_id] + grad
            for param in params:
                if param.id in raw:
                    grad = raw[param.id] if scale == 1.0 else raw[param.id] * scale
                    model[param.id] = grad if param.id not in model else model[param.id] + grad
        return model, seen

    # Loss scaling: each loss times the scale, every gradient (watched ones too) divided by
    # it again before averaging, clipping and the non-finite check.
    policy = optimizer.loss_scale_policy
    grads, diffs = summed_gradients(
        losses if policy is None else [policy.scaled(x) for x in losses])
    if policy is not None:
        grads = {blob_id: policy.unscaled(grad) for blob_id, grad in grads.items()}
        diffs = {blob_id: policy.unscaled(grad) for blob_id, grad in diffs.items()}
    # flow.watch_diff: the loss's ones-seeded gradient for each watched blob (zeros off
    # its path).
    graph.watched_diffs = [diffs[b.id] if b.id in diffs
                           else ops_api.zeros_like(b) for b in watched]
    pairs = [(n, p, grads[p.id]) for n, p in zip(names, params) if p.id in grads]
    if graph_ops.devices_of(graph).world > 1:
        # Averaged over the devices (this process's parts, summed above as every part's
        # loss counts, and the ranks') before clipping, which must see the averages.
        pairs = graph_ops.average_gradients(graph, pairs)
    if optimizer.grad_clipping is not None:
        clipped = optimizer.grad_clipping.clip([g for _, _, g in pairs])
        pairs = [(n, p, g) for (n, p, _), g in zip(pairs, clipped)]
    # Regularization joins after clipping, as OneFlow adds it inside the update rule.
    penalties, _ = summed_gradients(graph.regularization_losses)
    if penalties:
        pairs = [(n, p, g + penalties[p.id] if p.id in penalties else g) for n, p, g in pairs]
        pairs += [(n, p, penalties[p.id]) for n, p in zip(names, params)
                  if p.id in penalties and p.id not in grads]
    step_name = train_step_name(graph.name)
    record = session.declare_variable(step_name, (), dtypes.int64, zeros_initializer(),
                                      False, graph, is_state=True)
    record.on_host = True   # the schedule reads it on the host: no device read per step
    step = read_declared(step_name)
    if isinstance(optimizer.schedule, CustomScheduler):
        lr = optimizer.schedule.rate(graph)
    else:
        lr = state_ops.learning_rate(step, schedule=optimizer.schedule)
    # The non-finite guard (ops/state.py): one flag over the losses and the gradients
    # that every update of the step, and the step counter, obey (unless switched off:
    # flow.config.skip_nonfinite_steps; a dynamic loss scale needs it regardless).
    flag = ()
    if settings.get("skip_nonfinite_steps") or (policy is not None and policy.needs_guard):
        checked = [b for b in [*losses, *(g for _, _, g in pairs)] if b.dtype.is_floating]
        flag = (state_ops.all_finite(*checked),)
    optimizer.guard = flag[0] if flag else None
    try:
        for name, param, grad in pairs:
            optimizer.update(name, param, grad, lr, step)
    finally:
        optimizer.guard = None
    for node in graph.nodes:   # running statistics and flow.assign, traced earlier
        if flag and node.op.name in ("assign_moving_average", "assign") \
                and len(node.inputs) == 2:
            node.inputs = (*node.inputs, *flag)
    if policy is not None:
        policy.after_step(*flag)
    state_ops.increment(step, *flag, job=graph.name,
                        expected_skips=policy is not None and policy.needs_guard)

