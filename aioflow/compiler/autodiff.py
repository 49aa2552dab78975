"""Reverse-mode autodiff, graph to graph: gradient rules append ops to the same graph."""
from __future__ import annotations

from ..ir import Blob, Graph
from ..ops.elementwise import add_op, constant


def _reachable_from(graph: Graph, sources: set[int]) -> set[int]:
    """Ids of blobs that depend on any of ``sources``."""
    depends = set(sources)
    for node in graph.nodes:
        if any(b.id in depends for b in node.inputs):
            depends.update(b.id for b in node.outputs)
    return depends


def gradients(graph: Graph, loss: Blob, wrt: list[Blob]) -> dict[int, Blob]:
    """Blobs holding d(sum(loss))/d(w) for each ``w`` in ``wrt``, by blob id.

    The loss's own diff is seeded with ones, as OneFlow's autograd pass does (an integer
    loss too: OneFlow differentiates integer blobs, each diff of its blob's dtype); what
    ``flow.watch_diff`` reports. ``minimize`` then scales the model diffs alone by
    1/(the loss's element count) (:func:`model_diff_scale`), so a per-sample loss trains
    like its mean. ``wrt`` blobs without a path to the loss are absent from the result.
    """
    if not loss.dtype.is_numeric:
        raise TypeError(f"minimize: the loss must be a numeric Blob, got {loss.dtype.name}")
    depends = _reachable_from(graph, {w.id for w in wrt})
    if loss.id not in depends:
        return {}
    forward_nodes = list(graph.nodes)
    grads: dict[int, Blob] = {
        loss.id: constant(value=1.0, shape=loss.shape, dtype=loss.dtype)
    }
    for node in reversed(forward_nodes):
        output_grads = [grads.get(b.id) for b in node.outputs]
        if all(g is None for g in output_grads):
            continue
        if not any(b.id in depends for b in node.inputs):
            continue
        if not node.op.differentiable:
            continue
        if node.op.grad_rule is None:
            raise NotImplementedError(
                f"op {node.op.name!r} ({node.name}) has no gradient rule, but the loss depends "
                "on a trainable variable through it")
        input_grads = node.op.grad_rule(node, *output_grads)
        for blob, grad in zip(node.inputs, input_grads):
            if grad is None or blob.id not in depends:
                continue
            if grad.shape != blob.shape:
                raise AssertionError(f"gradient rule of {node.op.name} produced shape "
                                     f"{grad.shape} for input of shape {blob.shape}")
            previous = grads.get(blob.id)
            grads[blob.id] = grad if previous is None else add_op(previous, grad)
    return {w.id: grads[w.id] for w in wrt if w.id in grads}


def model_diff_scale(loss: Blob) -> float:
    """The factor OneFlow applies to the model diffs of ``loss`` (and to nothing else):
    1/(its instance count), the element count of the loss blob
    (``ScaleModelDiffByConstantLossInstanceNum`` in OneFlow's ``job_rewriter/autograd.cpp``)."""
    return 1.0 / max(loss.size, 1)
