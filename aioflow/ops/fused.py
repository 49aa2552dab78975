"""Fused ops: several primitive ops' work in one op, so a device step issues fewer launches.

The compiler puts them in a plan where the backend asks for it (``Backend.fuses_launches``,
:mod:`aioflow.compiler.launch_fusion`); users never call them. Each generic kernel here is
written against ``xp`` and does exactly the math of the ops it replaces (the numpy and the
strict backends run it, and tests compare it with the unfused composition); the CuPy
backend's one-launch versions live in :mod:`aioflow.backends.cupy.kernels`.

* ``bias_add_relu``: ``relu(bias_add(x, b))``; its gradient is the unfused one's
  (``relu_grad`` on the output, then the bias's reduction).
* ``sparse_softmax_cross_entropy_train``: the sparse softmax cross entropy and its gradient
  for a loss gradient known before the loss (``minimize``'s constant seed): outputs
  ``(loss, d_logits)``; the probabilities are never stored apart.
* ``multi_sgd_update`` / ``multi_momentum_update`` / ``multi_adam_update``: one optimizer's
  update of every variable of a step (inputs: the params, then the grads, then each slot's
  arrays, then the shared rate, step counter and non-finite flag).
"""
from __future__ import annotations

from .nn import bias_add_op, bias_grads, bias_view_shape, sparse_softmax_ce
from .elementwise import relu_grad
from .registry import register
from .state import adam_update, momentum_update, sgd_update


# -- bias + relu -----------------------------------------------------------------------------

@register("bias_add_relu", infer=bias_add_op.infer, writes_out=True)
def bias_add_relu(ctx, x, b, *, axis, out=None):
    xp = ctx.xp
    y = xp.add(x, b.reshape(bias_view_shape(x.ndim, axis, b.shape[0])), out=out)
    return xp.maximum(y, y.dtype.type(0), out=y)


@bias_add_relu.grad
def _bias_add_relu_grad(node, gy):
    x, b = node.inputs
    g = relu_grad(node.outputs[0], gy)
    return bias_grads(x, b, node.attrs["axis"], g)


# -- softmax + cross entropy + its gradient --------------------------------------------------

def _infer_ce_train(labels, logits, gy):
    (loss_shape, dtype), (prob_shape, _) = sparse_softmax_ce.infer(labels, logits)
    return [(loss_shape, dtype), (prob_shape, dtype)]


@register("sparse_softmax_cross_entropy_train", infer=_infer_ce_train, differentiable=False)
def sparse_softmax_ce_train(ctx, labels, logits, gy):
    """(per-sample loss, d loss / d logits for the loss gradient ``gy``)."""
    xp = ctx.xp
    loss, grad = sparse_softmax_ce.forward(ctx, labels, logits)   # grad holds prob here
    index = labels[..., None].astype(xp.intp)
    xp.put_along_axis(grad, index, xp.take_along_axis(grad, index, axis=-1) - 1, axis=-1)
    grad *= gy[..., None].astype(grad.dtype, copy=False)
    return loss, grad


# -- one update op per optimizer for all variables -------------------------------------------

# The single-variable op each multi op stands for, with how many slot arrays it takes per
# variable and whether it reads the step counter.
MULTI_UPDATES = {
    "sgd_update": ("multi_sgd_update", 0, False),
    "momentum_update": ("multi_momentum_update", 1, False),
    "adam_update": ("multi_adam_update", 2, True),
}


def _no_outputs(*inputs, **attrs):
    return []


def split_multi_inputs(arrays, count: int, slots: int, reads_step: bool):
    """(params, grads, [slot arrays per slot], lr, step or None, flag tuple) of a multi
    update's flat inputs."""
    params, grads = arrays[:count], arrays[count:2 * count]
    slot_arrays = [arrays[(2 + s) * count:(3 + s) * count] for s in range(slots)]
    rest = arrays[(2 + slots) * count:]
    lr, rest = rest[0], rest[1:]
    step = None
    if reads_step:
        step, rest = rest[0], rest[1:]
    return params, grads, slot_arrays, lr, step, tuple(rest)


def _register_multi(single, multi_name: str, slots: int, reads_step: bool):
    @register(multi_name, infer=_no_outputs, side_effect=True, differentiable=False)
    def multi_update(ctx, *arrays, count, **attrs):
        params, grads, slot_arrays, lr, step, flag = split_multi_inputs(
            arrays, count, slots, reads_step)
        for i, (param, grad) in enumerate(zip(params, grads)):
            extra = [s[i] for s in slot_arrays] + ([step] if reads_step else [])
            single.forward(ctx, param, grad, lr, *extra, *flag, **attrs)
    return multi_update


multi_sgd_update = _register_multi(sgd_update, "multi_sgd_update", 0, False)
multi_momentum_update = _register_multi(momentum_update, "multi_momentum_update", 1, False)
multi_adam_update = _register_multi(adam_update, "multi_adam_update", 2, True)
