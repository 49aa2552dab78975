"""Forward rewrites that do the same math with less memory traffic (run before autodiff,
so the backward pass is derived from the cheaper forward).

``pool_before_bias_relu``: ``max_pool(relu(bias_add(x, b)))`` with non-overlapping,
unpadded windows equals ``relu(bias_add(max_pool(x), b))``: the bias is constant over a
window (one value per channel) and relu is monotone, so neither changes which element
is the maximum (the relu is optional: ``max_pool(bias_add(x, b))`` moves the same way).
The elementwise work then runs on the pooled tensor (4x smaller for 2x2 windows), forward
and backward, and the pooling lands right after the convolution. Measured on the seed
LeNet: see docs/benchmarks.md.

``fuse_conv_max_pool``: ``max_pool(conv(x, w))`` with 2x2 windows, stride 2 and no
padding becomes one ``conv2d_max_pool2d`` op, whose kernel pools the convolution's output
as it is produced (:mod:`aioflow.kernels.conv_pool`) and never stores it; its gradient is
the unfused ops' (pooling gradient, then the convolution's). Run after
``pool_before_bias_relu``, which is what puts the pooling right after the convolution.
"""
from __future__ import annotations

from ..ir import Graph, tracing
from ..ops.conv import max_pool2d_op
from ..ops.elementwise import relu
from ..ops.nn import bias_add_op
from ..ops.conv import conv2d_max_pool2d_op, conv_geometry


def _single_consumer(graph: Graph, users, blob, op_name: str):
    readers = users.get(blob.id, [])
    if len(readers) != 1 or readers[0].op.name != op_name:
        return None
    if any(out is blob for out in graph.outputs):
        return None
    return readers[0]


def pool_before_bias_relu(graph: Graph) -> int:
    """Apply the rewrite wherever it is valid; returns how many places changed."""

    changed = 0
    users = graph.consumers()
    for bias_node in list(graph.nodes):
        if bias_node.op.name != "bias_add" or bias_node.attrs["axis"] != 1:
            continue
        x, bias = bias_node.inputs
        if x.ndim != 4:
            continue
        relu_node = _single_consumer(graph, users, bias_node.outputs[0], "relu")
        before_pool = relu_node if relu_node is not None else bias_node   # relu optional
        pool_node = _single_consumer(graph, users, before_pool.outputs[0], "max_pool2d")
        if pool_node is None or pool_node.outputs[1].id in users:
            continue
        ksize, strides, pads = (pool_node.attrs[k] for k in ("ksize", "strides", "pads"))
        if tuple(ksize) != tuple(strides) or any(p for pair in pads for p in pair):
            continue
        mark = len(graph.nodes)
        with tracing(graph):
            pooled, _ = max_pool2d_op(x, ksize=ksize, strides=strides, pads=pads,
                                      name=pool_node.name)
            result = bias_add_op(pooled, bias, axis=1, name=bias_node.name)
            if relu_node is not None:
                result = relu(result, name=relu_node.name)
        _move_traced_nodes(graph, mark, pool_node,
                           [bias_node] + ([relu_node] if relu_node is not None else []))
        _replace_uses(graph, pool_node.outputs[0], result)
        users = graph.consumers()
        changed += 1
    return changed


def fuse_conv_max_pool(graph: Graph) -> int:
    """Apply the rewrite wherever it is valid; returns how many places changed."""

    changed = 0
    users = graph.consumers()
    producer = {blob.id: node for node in graph.nodes for blob in node.outputs}
    for pool_node in list(graph.nodes):
        if pool_node.op.name != "max_pool2d" or pool_node.outputs[1].id in users:
            continue
        attrs = pool_node.attrs
        if (tuple(attrs["ksize"]) != (2, 2) or tuple(attrs["strides"]) != (2, 2)
                or any(p for pair in attrs["pads"] for p in pair)):
            continue
        conv_node = producer.get(pool_node.inputs[0].id)
        if (conv_node is None or conv_node.op.name != "conv2d"
                or _single_consumer(graph, users, conv_node.outputs[0], "max_pool2d")
                is not pool_node):
            continue
        mark = len(graph.nodes)
        with tracing(graph):
            pooled, _ = conv2d_max_pool2d_op(*conv_node.inputs, name=conv_node.name,
                                             **conv_geometry(conv_node))
        _move_traced_nodes(graph, mark, pool_node, [conv_node])
        _replace_uses(graph, pool_node.outputs[0], pooled)
        users = graph.consumers()
        changed += 1
    return changed


def _move_traced_nodes(graph: Graph, mark: int, replaced, removed) -> None:
    """The nodes traced since ``mark`` (appended at the end of ``graph.nodes``) take the
    place of ``replaced``, so they run where it ran; the ``removed`` nodes go."""
    new_nodes = graph.nodes[mark:]
    del graph.nodes[mark:]
    position = graph.nodes.index(replaced)
    graph.nodes[position:position + 1] = new_nodes
    for node in removed:
        graph.nodes.remove(node)


def _replace_uses(graph: Graph, old, new) -> None:
    for node in graph.nodes:
        if any(b is old for b in node.inputs):
            node.inputs = tuple(new if b is old else b for b in node.inputs)
    graph.outputs = [new if b is old else b for b in graph.outputs]
    # flow.watch_diff's gradient blobs become outputs after the rewrites (compile.py)
    graph.watched_diffs = [new if b is old else b for b in graph.watched_diffs]
