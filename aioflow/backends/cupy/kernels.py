"""The CuPy backend's own kernels, for ops whose generic (``xp``) kernel costs many launches.

On a GPU at small batches a step is bound by launches, each several microseconds of host
time whatever its size: the generic Adam update is eleven array operations per variable,
the sparse softmax cross entropy a dozen. Each kernel here is one CUDA kernel compiled by
CuPy (``ElementwiseKernel``, built at first use, so importing this module needs no CuPy).
float32 and float64 only; other dtypes take the generic kernel. Their results agree with
the generic kernels to float rounding (the op matrix runs on a GPU with
``AIOFLOW_DEVICE=gpu``).
"""
from __future__ import annotations

import functools

import numpy as np

from ...ops.nn import sparse_softmax_ce, sparse_softmax_ce_grad
from ...ops.state import adam_update, adamw_decay_rate, momentum_update, sgd_update

_FUSED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

# The softmax kernels' first half, one thread per row ``i`` of ``logits``: the row's
# maximum ``top``, ``exp(logit - top)`` written into the row of ``OUT``, their sum ``total``.
ROW_EXPONENTIALS = """
            const long long base = (long long)i * classes;
            T top = logits[base];
            for (int c = 1; c < classes; ++c) top = max(top, logits[base + c]);
            T total = 0;
            for (int c = 0; c < classes; ++c) {
                T e = exp(logits[base + c] - top);
                OUT[base + c] = e;
                total += e;
            }
"""


@functools.cache
def _kernels() -> dict:
    import cupy
    kernel = cupy.ElementwiseKernel
    return {
        # ``ok``: the train step's non-finite flag (0-d, broadcast; ops/state.py): where
        # it is 0 the kernel writes nothing, so a bad step leaves weights and slots as
        # they were without the host reading the flag.
        "sgd": kernel("T g, int8 ok, T lr, T decay", "T p",
                      "if (ok) p -= (g + p * decay) * lr;", "aioflow_sgd_update_guarded"),
        "momentum": kernel("T g, int8 ok, T lr, T beta, T decay", "T p, T v",
                           # OneFlow's: the weight decay apart from the velocity
                           "if (ok) { const T p0 = p; v = v * beta - g * lr; "
                           "p = p0 + v - p0 * decay * lr; }",
                           "aioflow_momentum_update_guarded"),
        "adam": kernel(
            "T g, int8 ok, T lr, T b1, T one_minus_b1, T b2, T one_minus_b2, T inv_c2, "
            "T eps, T decay", "T p, T m, T v",
            """
            if (ok) {
                p -= p * decay;
                m = m * b1 + g * one_minus_b1;
                v = v * b2 + g * g * one_minus_b2;
                p -= m / (sqrt(v) * inv_c2 + eps) * lr;
            }
            """, "aioflow_adam_update_guarded"),
        # One thread per row: max, exp, sum, normalise, then the picked log-probability.
        # A label outside [0, classes) (checked on the host for placeholder labels) gives
        # a NaN loss instead of reading out of bounds.
        "sparse_ce": kernel(
            "raw T logits, raw L labels, int32 classes", "T loss, raw T prob",
            ROW_EXPONENTIALS.replace("OUT", "prob") + """
            for (int c = 0; c < classes; ++c) prob[base + c] /= total;
            const long long label = (long long)labels[i];
            loss = (label < 0 || label >= classes)
                ? sqrt((T)-1) : log(total) - (logits[base + label] - top);
            """, "aioflow_sparse_softmax_ce"),
        "sparse_ce_grad": kernel(
            "raw T prob, raw L labels, raw T gy, int32 classes", "T grad",
            """
            const long long row = i / classes;
            const long long col = i - row * classes;
            grad = (prob[i] - (col == (long long)labels[row] ? (T)1 : (T)0)) * gy[row];
            """, "aioflow_sparse_softmax_ce_grad"),
    }


def _fused(*arrays) -> bool:
    return all(a.dtype in _FUSED_DTYPES for a in arrays)


def _ok(flag):
    """The kernels' ``ok`` argument: the step's flag (a 0-d device array), or 1 for an
    update op outside a guarded train step."""
    return flag[0] if flag else np.int8(1)


# ``extra``: the generic op's (ops/state.py): ``row_hints`` index arrays, then the step's
# flag. The fused kernels update every element, so an indexed-slices update (sparse_rows,
# maybe with hints) takes the generic op, and here ``extra`` is the flag alone.

@sgd_update.kernel_for("cupy")
def _sgd_update(ctx, param, grad, lr, *extra, weight_decay=0.0, sparse_rows=False,
                row_hints=0):
    if sparse_rows or row_hints or not _fused(param):
        return sgd_update.forward(ctx, param, grad, lr, *extra, weight_decay=weight_decay,
                                  sparse_rows=sparse_rows, row_hints=row_hints)
    t = param.dtype.type
    _kernels()["sgd"](grad, _ok(extra), t(lr), t(weight_decay), param)


@momentum_update.kernel_for("cupy")
def _momentum_update(ctx, param, grad, lr, velocity, *extra, beta, weight_decay=0.0,
                     sparse_rows=False, row_hints=0):
    if sparse_rows or row_hints or not _fused(param):
        return momentum_update.forward(ctx, param, grad, lr, velocity, *extra, beta=beta,
                                       weight_decay=weight_decay, sparse_rows=sparse_rows,
                                       row_hints=row_hints)
    t = param.dtype.type
    _kernels()["momentum"](grad, _ok(extra), t(lr), t(beta), t(weight_decay), param,
                           velocity)


@adam_update.kernel_for("cupy")
def _adam_update(ctx, param, grad, lr, m, v, step, *extra, beta1, beta2, epsilon,
                 do_bias_correction, weight_decay=0.0, sparse_rows=False, row_hints=0):
    if sparse_rows or row_hints or not _fused(param):
        return adam_update.forward(ctx, param, grad, lr, m, v, step, *extra, beta1=beta1,
                                   beta2=beta2, epsilon=epsilon,
                                   do_bias_correction=do_bias_correction,
                                   weight_decay=weight_decay, sparse_rows=sparse_rows,
                                   row_hints=row_hints)
    t = param.dtype.type
    lr = float(lr)                     # host values: the rate and the step counter
    decay = adamw_decay_rate(lr, step, beta1, beta2, do_bias_correction) * weight_decay
    inv_c2 = 1.0
    if do_bias_correction:
        n = float(step) + 1.0
        inv_c2 = 1.0 / (1 - beta2 ** n) ** 0.5
        lr = lr / (1 - beta1 ** n)
    _kernels()["adam"](grad, _ok(extra), t(lr), t(beta1), t(1 - beta1), t(beta2),
                       t(1 - beta2), t(inv_c2), t(epsilon), t(decay), param, m, v)


@sparse_softmax_ce.kernel_for("cupy")
def _sparse_softmax_ce(ctx, labels, logits):
    if not _fused(logits):
        return sparse_softmax_ce.forward(ctx, labels, logits)
    xp = ctx.xp
    classes = logits.shape[-1]
    logits = xp.ascontiguousarray(logits)
    loss = xp.empty(logits.shape[:-1], logits.dtype)
    prob = xp.empty(logits.shape, logits.dtype)
    if loss.size:
        _kernels()["sparse_ce"](logits, xp.ascontiguousarray(labels), np.int32(classes),
                                loss, prob)
    return loss, prob


@sparse_softmax_ce_grad.kernel_for("cupy")
def _sparse_softmax_ce_grad(ctx, prob, labels, gy):
    if not _fused(prob):
        return sparse_softmax_ce_grad.forward(ctx, prob, labels, gy)
    xp = ctx.xp
    grad = xp.empty(prob.shape, prob.dtype)
    if grad.size:
        _kernels()["sparse_ce_grad"](xp.ascontiguousarray(prob), xp.ascontiguousarray(labels),
                                     xp.ascontiguousarray(gy, dtype=prob.dtype),
                                     np.int32(prob.shape[-1]), grad)
    return grad
