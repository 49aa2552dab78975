"""Neural-network ops: softmax family, losses, bias_add, dropout, batch normalization."""
from __future__ import annotations

import numpy as np

from .._core import dtypes
from .channel_sums import channel_dot, channel_sum
from .elementwise import multiply_op, sum_to_shape
from .random_ops import mt19937_draws
from .registry import normalize_axis, register, require_float
from .shape import reshape

# -- softmax ------------------------------------------------------------------------------


def _infer_softmax(x, *, axis):
    require_float("softmax", x, "logits")
    return [(x.shape, x.dtype)]


@register("softmax", infer=_infer_softmax)
def softmax_op(ctx, x, *, axis):
    xp = ctx.xp
    shifted = x - x.max(axis=axis, keepdims=True)
    e = xp.exp(shifted, out=shifted)
    e /= e.sum(axis=axis, keepdims=True)
    return e


@register("softmax_grad", infer=lambda y, gy, *, axis: [(y.shape, y.dtype)],
          differentiable=False)
def softmax_grad(ctx, y, gy, *, axis):
    return y * (gy - (gy * y).sum(axis=axis, keepdims=True))


@softmax_op.grad
def _softmax_grad(node, gy):
    return [softmax_grad(node.outputs[0], gy, axis=node.attrs["axis"])]


@register("log_softmax", infer=_infer_softmax)
def log_softmax_op(ctx, x, *, axis):
    xp = ctx.xp
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))


@register("log_softmax_grad", infer=lambda y, gy, *, axis: [(y.shape, y.dtype)],
          differentiable=False)
def log_softmax_grad(ctx, y, gy, *, axis):
    return gy - ctx.xp.exp(y) * gy.sum(axis=axis, keepdims=True)


@log_softmax_op.grad
def _log_softmax_grad(node, gy):
    return [log_softmax_grad(node.outputs[0], gy, axis=node.attrs["axis"])]


# -- fused softmax + cross entropy --------------------------------------------------------


def _infer_sparse_ce(labels, logits):
    require_float("sparse_softmax_cross_entropy_with_logits", logits, "logits")
    if labels.dtype not in (dtypes.int32, dtypes.int64, dtypes.int8, dtypes.uint8):
        raise TypeError("sparse_softmax_cross_entropy_with_logits: labels must be an integer "
                        f"Blob, got {labels.dtype.name}")
    if labels.shape != logits.shape[:-1]:
        raise ValueError(
            "sparse_softmax_cross_entropy_with_logits: labels shape must equal logits shape "
            f"without its last axis: expected {logits.shape[:-1]}, got {labels.shape}")
    return [(labels.shape, logits.dtype), (logits.shape, logits.dtype)]


@register("sparse_softmax_cross_entropy", infer=_infer_sparse_ce)
def sparse_softmax_ce(ctx, labels, logits):
    """Outputs (per-sample loss, softmax probabilities); the second feeds the gradient."""
    xp = ctx.xp
    classes = logits.shape[-1]
    # Labels fed by a placeholder are checked on the host when the job is called; this
    # check covers computed labels, on the CPU only (a device would stall to read them).
    if xp is np and labels.size and (int(labels.min()) < 0 or int(labels.max()) >= classes):
        raise ValueError(
            f"sparse_softmax_cross_entropy_with_logits: labels must lie in [0, {classes}), "
            f"got values from {int(labels.min())} to {int(labels.max())}")
    shifted = logits - logits.max(axis=-1, keepdims=True)
    prob = xp.exp(shifted)
    total = prob.sum(axis=-1, keepdims=True)
    prob /= total
    picked = xp.take_along_axis(shifted, labels[..., None].astype(xp.intp), axis=-1)[..., 0]
    loss = xp.log(total[..., 0]) - picked
    return loss.astype(logits.dtype, copy=False), prob


@register("sparse_softmax_cross_entropy_grad",
          infer=lambda prob, labels, gy: [(prob.shape, prob.dtype)], differentiable=False)
def sparse_softmax_ce_grad(ctx, prob, labels, gy):
    xp = ctx.xp
    grad = prob.copy()
    index = labels[..., None].astype(xp.intp)
    xp.put_along_axis(grad, index, xp.take_along_axis(grad, index, axis=-1) - 1, axis=-1)
    grad *= gy[..., None]
    return grad


@sparse_softmax_ce.grad
def _sparse_ce_grad(node, g_loss, g_prob):
    labels = node.inputs[0]
    prob = node.outputs[1]
    if g_prob is not None:
        raise NotImplementedError("differentiating through the probabilities output of "
                                  "sparse_softmax_cross_entropy is not supported")
    return [None, sparse_softmax_ce_grad(prob, labels, g_loss)]


def _infer_dense_ce(labels, logits):
    require_float("softmax_cross_entropy_with_logits", logits, "logits")
    if labels.shape != logits.shape or labels.dtype is not logits.dtype:
        raise ValueError("softmax_cross_entropy_with_logits: labels must have the logits' "
                         f"shape and dtype {logits.dtype.name}{list(logits.shape)}, got "
                         f"{labels.dtype.name}{list(labels.shape)}")
    return [(logits.shape[:-1], logits.dtype), (logits.shape, logits.dtype)]


@register("softmax_cross_entropy", infer=_infer_dense_ce)
def softmax_ce(ctx, labels, logits):
    """Outputs (per-sample loss, log-probabilities); the second feeds the gradient (kept in
    log space: d/d labels is -log_softmax, which probabilities lose once they underflow)."""
    xp = ctx.xp
    shifted = logits - logits.max(axis=-1, keepdims=True)
    total = xp.exp(shifted).sum(axis=-1, keepdims=True)
    log_prob = shifted - xp.log(total)
    loss = -(labels * log_prob).sum(axis=-1)
    return loss.astype(logits.dtype, copy=False), log_prob


@register("softmax_cross_entropy_grad",
          infer=lambda log_prob, labels, gy: [(log_prob.shape, log_prob.dtype)] * 2,
          differentiable=False)
def softmax_ce_grad(ctx, log_prob, labels, gy):
    # d/d logits is prob - labels, as OneFlow's (and TensorFlow's) kernel computes it: exact
    # for labels that sum to 1 along the class axis; for others it is not the derivative
    # of the loss (which would be prob * sum(labels) - labels), but what they report.
    g = gy[..., None]
    d_logits = (ctx.xp.exp(log_prob) - labels) * g
    d_labels = -log_prob * g
    return d_logits, d_labels


@softmax_ce.grad
def _dense_ce_grad(node, g_loss, g_log_prob):
    if g_log_prob is not None:
        raise NotImplementedError("differentiating through the log-probabilities output of "
                                  "softmax_cross_entropy is not supported")
    labels = node.inputs[0]
    d_logits, d_labels = softmax_ce_grad(node.outputs[1], labels, g_loss)
    return [d_labels, d_logits]


# -- bias_add -----------------------------------------------------------------------------


def _infer_bias_add(x, b, *, axis):
    if b.ndim != 1 or b.shape[0] != x.shape[axis]:
        raise ValueError(f"bias_add: bias must have shape ({x.shape[axis]},) to match axis "
                         f"{axis} of value {x.shape}, got {b.shape}")
    if b.dtype is not x.dtype:
        raise TypeError(f"bias_add: bias dtype {b.dtype.name} differs from value dtype "
                        f"{x.dtype.name}")
    return [(x.shape, x.dtype)]


def bias_view_shape(ndim, axis, size):
    shape = [1] * ndim
    shape[axis] = size
    return tuple(shape)


@register("bias_add", infer=_infer_bias_add, writes_out=True)
def bias_add_op(ctx, x, b, *, axis, out=None):
    return ctx.xp.add(x, b.reshape(bias_view_shape(x.ndim, axis, b.shape[0])), out=out)


def bias_grads(x, b, axis, gy):
    """[d x, d b] of ``bias_add(x, b, axis)`` for the output gradient ``gy`` (also the
    fused bias + relu's, for the gradient behind its relu)."""
    gb = reshape(sum_to_shape(gy, bias_view_shape(x.ndim, axis, b.shape[0])), shape=b.shape)
    return [gy, gb]


@bias_add_op.grad
def _bias_add_grad(node, gy):
    x, b = node.inputs
    return bias_grads(x, b, node.attrs["axis"], gy)


# -- dropout ------------------------------------------------------------------------------


def _infer_dropout(x, *, rate, noise_shape=None, seed=None, key=None):
    require_float("dropout", x)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout: rate must be in [0, 1), got {rate}")
    mask_shape = tuple(noise_shape) if noise_shape is not None else x.shape
    return [(x.shape, x.dtype), (mask_shape, x.dtype)]


@register("dropout", infer=_infer_dropout)
def dropout_op(ctx, x, *, rate, noise_shape=None, seed=None, key=None):
    shape = tuple(noise_shape) if noise_shape is not None else x.shape
    if seed is not None and key is not None and ctx.backend.name in ("numpy", "strict"):
        # OneFlow's CPU kernel (random_mask_like): the op's own std::mt19937(seed) stream,
        # kept where the float32 draw exceeds rate: its very masks
        draws = mt19937_draws(ctx, seed, key, int(np.prod(shape)))
        keep = ctx.xp.asarray(draws.reshape(shape) > np.float32(rate))
    else:
        # Generator.random draws float32/float64 only: float16 data compares float32 draws.
        draw = x.dtype if x.dtype.itemsize >= 4 else dtypes.float32.numpy
        keep = ctx.rng_for(seed).random(shape, dtype=draw) >= rate
    mask = keep.astype(x.dtype) * x.dtype.type(1.0 / (1.0 - rate))
    return x * mask, mask


@dropout_op.grad
def _dropout_grad(node, gy, g_mask):
    return [multiply_op(gy, node.outputs[1])]


# -- batch normalization ------------------------------------------------------------------


def _infer_bn_train(x, gamma, beta, *, axis, epsilon):
    require_float("batch_normalization", x, "inputs")
    c = x.shape[axis]
    for arg, blob in (("gamma", gamma), ("beta", beta)):
        if blob.shape != (c,):
            raise ValueError(f"batch_normalization: {arg} must have shape ({c},), got "
                             f"{blob.shape}")
    return [(x.shape, x.dtype), ((c,), x.dtype), ((c,), x.dtype), ((c,), x.dtype)]


@register("batch_norm_train", infer=_infer_bn_train)
def batch_norm_train(ctx, x, gamma, beta, *, axis, epsilon):
    """Outputs (y, batch mean, unbiased batch variance, 1/sqrt(biased var + eps))."""
    xp = ctx.xp
    view = bias_view_shape(x.ndim, axis, x.shape[axis])
    count = x.size // x.shape[axis]
    # divided in float64, as numpy's mean divides (a float16 count could overflow)
    mean = (channel_sum(xp, x, axis) / np.float64(count)).astype(x.dtype, copy=False)
    centered = x - mean.reshape(view)
    var = (channel_dot(xp, centered, centered, axis) / np.float64(count)).astype(
        x.dtype, copy=False)
    inv_std = (1.0 / xp.sqrt(var + epsilon)).astype(x.dtype, copy=False)
    y = centered * (inv_std * gamma).reshape(view) + beta.reshape(view)
    unbiased = var * x.dtype.type(count / max(count - 1, 1))
    return y, mean, unbiased, inv_std


@register("batch_norm_grad",
          infer=lambda x, gamma, mean, inv_std, gy, *, axis: [
              (x.shape, x.dtype), (gamma.shape, x.dtype), (gamma.shape, x.dtype)],
          differentiable=False)
def batch_norm_grad(ctx, x, gamma, mean, inv_std, gy, *, axis):
    """(dx, d gamma, d beta). With ``c = x - mean`` and, per channel, ``a = gamma * inv_std``:
    ``d beta = sum(gy)``, ``d gamma = sum(gy * c) * inv_std`` and
    ``dx = a * gy - a * (inv_std * d gamma * c + d beta) / count``, written as one product
    of ``gy`` and two passes over ``c`` in place: a third of the full-size temporaries
    and passes of the textbook form (MobileNet-v2's 52 batch norms: 21% of its step)."""
    xp = ctx.xp
    view = bias_view_shape(x.ndim, axis, x.shape[axis])
    count = x.size // x.shape[axis]
    centered = x - mean.reshape(view)
    d_beta = channel_sum(xp, gy, axis)
    d_gamma = (channel_dot(xp, gy, centered, axis) * inv_std).astype(x.dtype, copy=False)
    a = gamma * inv_std
    dx = xp.multiply(gy, a.reshape(view))
    centered *= (-a * inv_std * d_gamma / count).reshape(view).astype(x.dtype, copy=False)
    dx += centered
    dx -= (a * d_beta / count).reshape(view).astype(x.dtype, copy=False)
    return dx.astype(x.dtype, copy=False), d_gamma, d_beta


@batch_norm_train.grad
def _bn_grad(node, gy, g_mean, g_var, g_inv_std):
    if any(g is not None for g in (g_mean, g_var, g_inv_std)):
        raise NotImplementedError("batch_normalization: only the normalized output is "
                                  "differentiable")
    x, gamma, _ = node.inputs
    _, mean, _, inv_std = node.outputs
    dx, d_gamma, d_beta = batch_norm_grad(x, gamma, mean, inv_std, gy, axis=node.attrs["axis"])
    return [dx, d_gamma, d_beta]


def _infer_bn_infer(x, gamma, beta, mean, var, *, axis, epsilon):
    _infer_bn_train(x, gamma, beta, axis=axis, epsilon=epsilon)
    return [(x.shape, x.dtype)]


@register("batch_norm_inference", infer=_infer_bn_infer)
def batch_norm_inference(ctx, x, gamma, beta, mean, var, *, axis, epsilon):
    view = bias_view_shape(x.ndim, axis, x.shape[axis])
    inv_std = (1.0 / ctx.xp.sqrt(var + epsilon)).astype(x.dtype, copy=False)
    return (x - mean.reshape(view)) * (inv_std * gamma).reshape(view) + beta.reshape(view)


def normalize_bn_axis(x, axis):
    return normalize_axis("batch_normalization", axis, x.ndim)


@register("batch_norm_inference_grad",
          infer=lambda x, gamma, mean, var, gy, *, axis, epsilon: [
              (x.shape, x.dtype), (gamma.shape, x.dtype), (gamma.shape, x.dtype)],
          differentiable=False)
def batch_norm_inference_grad(ctx, x, gamma, mean, var, gy, *, axis, epsilon):
    xp = ctx.xp
    view = bias_view_shape(x.ndim, axis, x.shape[axis])
    inv_std = (1.0 / xp.sqrt(var + epsilon)).astype(x.dtype, copy=False)
    dx = gy * (inv_std * gamma).reshape(view)
    xhat = (x - mean.reshape(view)) * inv_std.reshape(view)
    return dx, channel_dot(xp, gy, xhat, axis), channel_sum(xp, gy, axis)


@batch_norm_inference.grad
def _bn_inference_grad(node, gy):
    x, gamma, _beta, mean, var = node.inputs
    dx, d_gamma, d_beta = batch_norm_inference_grad(x, gamma, mean, var, gy, **node.attrs)
    return [dx, d_gamma, d_beta, None, None]
