"""Stateful ops: reading variables and updating them in place (optimizers, counters).

Update ops have ``side_effect=True`` and no outputs; the compiler keeps them and runs
them after every other op of the step, so all reads of a variable in a step see the
value from before the step (as in OneFlow and PyTorch).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .._core import dtypes
from . import row_updates
from .row_updates import each_row_once
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


# -- the train step's non-finite guard --------------------------------------------------
# A train job computes one flag per step, ``all_finite(losses..., gradients...)`` (1: all
# in range), and every update op of the step takes it as its last input: where it is 0
# the variables, optimizer slots and step counter keep their values, as AMP's loss scaler
# skips the optimizer step. The updates stay on the device: on a GPU the flag masks them
# there, and only the step counter's increment (the last op of the step, after every
# update is queued) reads it on the host.
#
# "In range" is stricter than finite: the sum of squares of each array must be finite,
# i.e. its L2 norm below sqrt(max) (1.8e19 in float32). That is what makes the step's
# *writes* safe, not only its inputs: a finite gradient of 1e28 (a batch scaled by 1e30)
# squares to infinity in Adam's second moment and moves weights to 1e27 with momentum,
# after which every later step overflows. With every gradient's square finite, the
# built-in rules write finite values: Adam's and RMSProp's moments are convex
# combinations of finite values and finite squares, momentum and the weights move by at
# most lr times such a gradient (docs/faults.md). One BLAS dot per array costs less than
# the isfinite pass it replaces (about 40 us per 400k float32 values, against 83).

def _infer_flag(*arrays):
    return [((), dtypes.int8)]


def _squares_finite(xp, a) -> bool:
    """Whether ``a`` (finite or not) has a finite sum of squares: NaN, infinity and values
    whose squares overflow all make it infinite or NaN."""
    if a.dtype.kind != "f" or a.dtype.itemsize < 4:
        # float16's square root of max is 256: too small a bound for half-precision
        # gradients (AMP scales them up); for them, as for the rest, finiteness only.
        return xp.isfinite(a).all()
    flat = a.reshape(-1)
    if xp is np:
        return xp.isfinite(xp.dot(flat, flat))
    # On a device, an elementwise square and a reduction rather than a BLAS dot: CuPy
    # refuses cuBLAS calls while a CUDA graph is captured (ops/cupy_capture_gemm.py), and
    # the guard is part of every captured train step.
    return xp.isfinite((flat * flat).sum())


def _rows_squares_finite(a, written) -> bool:
    """:func:`_squares_finite` of a host table that is zero but for the rows (first axis)
    ``written`` names (a ``gather_grad`` output kept in a ``RowsBuffer``), the same answer
    from reading those rows only, but where it could differ.

    The zeros add nothing: the whole table's sum of squares is the rows', S, exactly, and
    each of its non-zero elements is finite exactly when it is among the rows. The sums
    are rounded in another order, though: every partial sum, whichever the order, lies
    within a factor ``(1 + u)^k`` of its exact value (non-negative terms, ``k`` rounded
    additions and products at most, ``u`` the unit roundoff), so when the rows' sum is
    finite and ``(1 + u)^(2k)`` times it is still below the dtype's maximum, no order
    overflows. Otherwise (a NaN, an infinity, a sum near the maximum: a step the guard may
    refuse) the whole table is read, as before."""
    rows = each_row_once(written)   # a repeat would count its squares twice
    part = np.take(a, rows, axis=0)
    if a.dtype.kind != "f" or a.dtype.itemsize < 4:
        return bool(np.isfinite(part).all())   # zeros are finite: the same answer
    flat = part.reshape(-1)
    total = np.dot(flat, flat)
    if np.isfinite(total):
        info = np.finfo(a.dtype)
        margin = math.exp((2 * flat.size + 4) * float(info.eps)) * 1.01
        if float(total) * margin < float(info.max):
            return True
    return bool(_squares_finite(np, a))


def _host_finite(a, buffer) -> bool:
    if buffer is not None and a is buffer.array and buffer.rows is not None \
            and buffer.zero_elsewhere:
        return _rows_squares_finite(a, buffer.rows)
    return bool(_squares_finite(np, a))


@register("all_finite", infer=_infer_flag, differentiable=False)
def all_finite(ctx, *arrays, row_buffers=None):
    """1 (int8, 0-d) when every array has finite values whose squares are finite too
    (its sum of squares is finite), else 0. ``row_buffers`` (the compiled plan's, on the
    host): for each array None or the ``RowsBuffer`` (or ``ScaledRows``) of the op that
    may have produced it; an array that is that buffer's table, zero outside its rows, is
    read in those rows only (:func:`_rows_squares_finite`)."""
    xp = ctx.xp
    if xp is np:   # on the host: stop at the first array that is not
        buffers = row_buffers or (None,) * len(arrays)
        return np.asarray(all(_host_finite(a, b) for a, b in zip(arrays, buffers)),
                          dtype=np.int8)
    ok = None
    for a in arrays:    # one reduction per array, all on the device
        this = _squares_finite(xp, a)
        ok = this if ok is None else xp.logical_and(ok, this)
    return (ok if ok is not None else xp.asarray(True)).astype(np.int8)


def _on_host(flag) -> bool:
    return isinstance(flag, (np.ndarray, np.generic))


def _guarded(ctx, flag, targets, update) -> None:
    """``update(*targets)`` in place, unless the step's ``flag`` (a tuple of 0 or 1
    arrays) is 0. A host flag is a plain branch; a device flag is not read (that would
    stall the step): the update runs on copies that replace the targets where it is 1."""
    keep = _step_mask(flag)
    if keep is None:
        update(*targets)
    elif keep is not False:
        copies = [t.copy() for t in targets]
        update(*copies)
        for target, new in zip(targets, copies):
            ctx.xp.copyto(target, new, where=keep)


def _step_mask(flag):
    """What the step's non-finite flag (a tuple of 0 or 1 arrays) allows: None (no flag,
    or a host flag of 1: update), False (a host flag of 0: write nothing), or a device
    boolean to mask the writes with (reading it on the host would stall the step)."""
    if not flag:
        return None
    ok, = flag
    if _on_host(ok):
        return None if ok else False
    return ok.astype(bool)


def _apply(ctx, targets, grad, update, extra, sparse_rows, row_hints) -> None:
    """``update(grad, *targets)`` (in place) as the step's flag allows. ``extra``: the
    op's inputs after its own, ``row_hints`` index arrays and then the flag, if any.

    ``sparse_rows`` (``function_config.indexed_slices_optimizer_conf`` lists the variable):
    as OneFlow's indexed-slices updates, which update the rows a step gathered and no
    other, only the rows (first axis) where ``grad`` has a touched element (``|g| >=
    1e-12``) change, each as a whole, weight decay and momentum included; the others keep
    their values exactly. It costs those rows, not the table: ``ops/row_updates.py`` finds
    them (from the gather's indices in ``row_hints``, when the optimizer could pass them)
    and updates them alone with the same operations, so the values are the whole-table
    update's bit for bit."""
    hints, flag = extra[:row_hints], extra[row_hints:]
    if not (sparse_rows and grad.ndim):
        _guarded(ctx, flag, targets, functools.partial(update, grad))
        return
    keep = _step_mask(flag)
    if keep is not False:   # a step the guard refused writes nothing
        row_updates.update_touched_rows(ctx.xp, targets, grad, hints, update, keep)


# The sgd, momentum and adam updates: ``extra`` holds ``row_hints`` index arrays, the
# gathers' indices whose valid entries name every row where ``grad`` may have a touched
# element (passed only with ``sparse_rows``), then the step's flag, if the job has one.

@_update("sgd_update")
def sgd_update(ctx, param, grad, lr, *extra, weight_decay=0.0, sparse_rows=False,
               row_hints=0):
    def update(grad, param):
        param -= _decayed(ctx.xp, param, grad, weight_decay) * param.dtype.type(lr)
    _apply(ctx, [param], grad, update, extra, sparse_rows, row_hints)


@_update("momentum_update")
def momentum_update(ctx, param, grad, lr, velocity, *extra, beta, weight_decay=0.0,
                    sparse_rows=False, row_hints=0):
    def update(grad, param, velocity):
        # OneFlow's MomentumUpdateFunctor: v = beta * v - lr * g; then the weight decay
        # apart from the velocity: param += v - lr * weight_decay * param (the old param).
        t = param.dtype.type
        decay = param * t(lr * weight_decay) if weight_decay else None
        velocity *= velocity.dtype.type(beta)
        velocity -= grad * t(lr)
        param += velocity
        if decay is not None:
            param -= decay
    _apply(ctx, [param, velocity], grad, update, extra, sparse_rows, row_hints)


@_update("adam_update")
def adam_update(ctx, param, grad, lr, m, v, step, *extra, beta1, beta2, epsilon,
                do_bias_correction, weight_decay=0.0, sparse_rows=False, row_hints=0):
    xp = ctx.xp
    t = param.dtype.type

    def update(grad, param, m, v):
        rate = lr
        if weight_decay:  # decoupled (AdamW): w -= rate * decay * w
            param -= param * t(adamw_decay_rate(rate, step, beta1, beta2, do_bias_correction)
                               * weight_decay)
        m *= t(beta1)
        m += grad * t(1 - beta1)
        v *= t(beta2)
        v += grad * grad * t(1 - beta2)
        if do_bias_correction:
            # As PyTorch and the Adam paper: epsilon is added to the *corrected* sqrt(v).
            n = float(step) + 1.0
            correction1, correction2 = 1 - beta1 ** n, (1 - beta2 ** n) ** 0.5
            delta = m / (xp.sqrt(v) * t(1 / correction2) + t(epsilon))
            rate = float(rate) / correction1
        else:
            delta = m / (xp.sqrt(v) + t(epsilon))
        param -= delta * t(rate)
    _apply(ctx, [param, m, v], grad, update, extra, sparse_rows, row_hints)


def adamw_decay_rate(lr, step, beta1, beta2, do_bias_correction) -> float:
    """The rate of AdamW's decoupled decay (``w -= rate * weight_decay * w``, not scaled by
    Adam's moments): OneFlow's, the rate its adam kernel applies to the whole step, so
    with bias correction ``lr * sqrt(1 - b2^t) / (1 - b1^t)`` (``t`` = step + 1)."""
    rate = float(lr)
    if do_bias_correction:
        n = float(step) + 1.0
        rate *= (1 - beta2 ** n) ** 0.5 / (1 - beta1 ** n)
    return rate


@_update("rmsprop_update")
def rmsprop_update(ctx, param, grad, lr, mean_square, *rest, decay_rate, epsilon,
                   weight_decay=0.0, guarded=False):
    # ``rest``: the centered form's mean gradient, then (``guarded``) the step's flag.
    flag, mean_grad = (rest[-1:], rest[:-1]) if guarded else ((), rest)
    xp = ctx.xp
    t = param.dtype.type
    g = _decayed(xp, param, grad, weight_decay)

    def update(param, mean_square, *mean_grad):
        mean_square *= t(decay_rate)
        mean_square += g * g * t(1 - decay_rate)
        if mean_grad:  # centered: divide by an estimate of the variance instead
            mg, = mean_grad
            mg *= t(decay_rate)
            mg += g * t(1 - decay_rate)
            denom = xp.sqrt(mean_square - mg * mg + t(epsilon))
        else:
            denom = xp.sqrt(mean_square + t(epsilon))
        param -= g / denom * t(lr)
    _guarded(ctx, flag, [param, mean_square, *mean_grad], update)


def _skipped_step_handler(session, job: str, step: int, warn: bool, call: int) -> None:
    raise RuntimeError("no handler of skipped steps: aioflow.engine.step_guard registers it")


def on_skipped_step(handler) -> None:
    """Register ``handler(session, job, step, warn=, call=)``, called when a guarded
    train step applies no update (the engine's :mod:`aioflow.engine.step_guard` counts and
    reports it; ops sit below the engine, so it registers here rather than being imported)."""
    global _skipped_step_handler
    _skipped_step_handler = handler


@_update("increment")
def increment(ctx, counter, *flag, job=None, expected_skips=False):
    # A skipped step does not count: the counter is the number of updates applied, which
    # Adam's bias correction and the learning-rate schedule must follow (the optimizer
    # slots did not move either). Reading a device flag here costs no extra stall: this
    # is the step's last op, and the step is waited for right after it anyway.
    if flag:
        # Calls of the job in this session, so that a warning can name the bad batch (the
        # counter cannot: it skips bad steps and continues a loaded checkpoint's count).
        calls = ctx.session.guarded_calls
        calls[job] = calls.get(job, 0) + 1
        ok, = flag
        if not (ok if _on_host(ok) else ctx.backend.to_host(ok)):
            _skipped_step_handler(ctx.session, job, int(counter), warn=not expected_skips,
                                  call=calls[job])
            return
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
def assign_moving_average(ctx, target, value, *flag, momentum):
    # ``flag``: in a train job, the step's non-finite guard (a bad batch must not poison
    # batch normalization's running statistics either).
    t = target.dtype.type

    def update(target):
        target *= t(momentum)
        target += value * t(1 - momentum)
    _guarded(ctx, flag, [target], update)


@_update("assign")
def assign(ctx, ref, value, *flag):
    """``ref`` (a variable's own array) takes ``value``: flow.assign, and the state that
    ops such as the ordinal encoder and the quantization observers carry across steps.
    ``flag``: in a train job, the step's non-finite guard (a skipped step changes no
    variable)."""
    def update(ref):
        ctx.xp.copyto(ref, value)
    _guarded(ctx, flag, [ref], update)


def _infer_lr_from_blob(rate):
    if rate.size != 1 or not rate.dtype.is_floating:
        raise ValueError(f"flow.optimizer.CustomScheduler: the learning-rate blob must hold one "
                         f"floating-point value, got shape {rate.shape} {rate.dtype.name}")
    return [((), dtypes.float64)]


@register("learning_rate_from_blob", infer=_infer_lr_from_blob, differentiable=False)
def learning_rate_from_blob(ctx, rate):
    # flow.optimizer.CustomScheduler: the rate is a value the job computed. The update
    # kernels take the rate as a host scalar (as from ``learning_rate``), so it is read to
    # the host here: one small device read per step on a GPU.
    value = rate if _on_host(rate) else ctx.backend.to_host(rate)
    return np.asarray(float(np.asarray(value).reshape(-1)[0]), dtype=np.float64)


def _infer_stale(stale, var):
    return [(stale.shape, stale.dtype)]


@register("ssp_value", infer=_infer_stale)
def ssp_value(ctx, stale, var):
    """``stale``, a variable's value some steps late (OneFlow's ssp_variable_proxy), whose
    gradient goes to the variable ``var`` itself: the stage reads old weights, the
    optimizer updates the current ones."""
    return stale


@ssp_value.grad
def _ssp_value_grad(node, gy):
    return [None, gy]
