"""Rewrites that cut the kernel launches of a step, for backends bound by launches (a GPU).

On a GPU at small batches each op's launch costs several microseconds of host time however
little arithmetic it holds; the compiler knows the whole step, so it merges ops into the
fused ops of :mod:`aioflow.ops.fused`:

* :func:`fuse_bias_relu` (before autodiff): ``relu(bias_add(x, b))`` -> ``bias_add_relu``;
* :func:`fuse_cross_entropy_gradient` (after it): the sparse softmax cross entropy and its
  gradient op -> one ``sparse_softmax_cross_entropy_train`` op, where the loss gradient
  does not depend on the loss (``minimize``'s seed is a constant);
* :func:`fuse_optimizer_updates` (after it): every ``sgd_update`` (``momentum_update``,
  ``adam_update``) of the step sharing rate, flag and hyper-parameters -> one multi-tensor
  update op.

Which backends get them: ``Backend.fuses_launches`` (the CuPy and strict backends and the
simulated GPU), unless ``flow.config.launch_fusion`` forces them on or off. On numpy the
same fused ops would cost what the unfused ones do (numpy has no launches to save; one
fused bias + relu epilogue was measured and dropped on the CPU, docs/benchmarks.md), so
the CPU default path is left as it was.

:func:`launches_per_step` counts what a plan issues: one per instruction whose op
launches device work (not variable reads, host-side ops or views).
"""
from __future__ import annotations

from ..ir import Graph, tracing
from .fusion import _move_traced_nodes, _replace_uses, _single_consumer
from ..ops.fused import bias_add_relu
from ..ops.fused import sparse_softmax_ce_train
from ..ops import fused

# Ops that launch nothing on the device: variable reads (the variable's own array),
# host-side ops (the rate schedule, the step counter) and views.
NO_LAUNCH_OPS = frozenset({"variable", "learning_rate", "increment", "reshape", "identity"})


def enabled(option, backend) -> bool:
    """Whether a plan for ``backend`` gets the launch fusions (option ``launch_fusion``:
    "auto" follows the backend, True / False force them)."""
    if option == "auto":
        return bool(getattr(backend, "fuses_launches", False))
    return bool(option)


def fuse_bias_relu(graph: Graph) -> int:
    """``relu(bias_add(x, b))`` -> ``bias_add_relu(x, b)``; returns how many places."""

    changed = 0
    users = graph.consumers()
    for bias_node in list(graph.nodes):
        if bias_node.op.name != "bias_add":
            continue
        relu_node = _single_consumer(graph, users, bias_node.outputs[0], "relu")
        if relu_node is None:
            continue
        mark = len(graph.nodes)
        with tracing(graph):
            fused = bias_add_relu(*bias_node.inputs, name=bias_node.name, **bias_node.attrs)
        _move_traced_nodes(graph, mark, relu_node, [bias_node])
        _replace_uses(graph, relu_node.outputs[0], fused)
        users = graph.consumers()
        changed += 1
    return changed


def _ancestors_after(graph: Graph, blob, position: int, producer) -> list | None:
    """The nodes after ``position`` that ``blob`` is computed from, in graph order; None
    if one of them reads a value of the node at ``position``."""
    forbidden = {b.id for b in graph.nodes[position].outputs}
    index_of = {id(node): i for i, node in enumerate(graph.nodes)}
    found, stack = {}, [blob]
    while stack:
        current = stack.pop()
        if current.id in forbidden:
            return None
        node = producer.get(current.id)
        if node is None or index_of[id(node)] <= position or id(node) in found:
            continue
        if node.op.side_effect:
            return None
        found[id(node)] = node
        stack.extend(node.inputs)
    return sorted(found.values(), key=lambda n: index_of[id(n)])


def fuse_cross_entropy_gradient(graph: Graph) -> int:
    """The sparse softmax cross entropy whose probabilities feed only its gradient op ->
    one op computing the loss and the logits' gradient; returns how many places."""

    changed = 0
    for ce_node in [n for n in graph.nodes if n.op.name == "sparse_softmax_cross_entropy"]:
        users = graph.consumers()
        grad_node = _single_consumer(graph, users, ce_node.outputs[1],
                                     "sparse_softmax_cross_entropy_grad")
        if grad_node is None or grad_node.inputs[1] is not ce_node.inputs[0]:
            continue
        producer = {b.id: n for n in graph.nodes for b in n.outputs}
        position = graph.nodes.index(ce_node)
        hoisted = _ancestors_after(graph, grad_node.inputs[2], position, producer)
        if hoisted is None:   # the loss gradient depends on the loss: keep them apart
            continue
        for node in hoisted:   # computed before the fused op, in their own order
            graph.nodes.remove(node)
        position = graph.nodes.index(ce_node)
        graph.nodes[position:position] = hoisted
        mark = len(graph.nodes)
        labels, logits = ce_node.inputs
        with tracing(graph):
            loss, d_logits = sparse_softmax_ce_train(labels, logits, grad_node.inputs[2],
                                                     name=ce_node.name)
        _move_traced_nodes(graph, mark, ce_node, [grad_node])
        _replace_uses(graph, ce_node.outputs[0], loss)
        _replace_uses(graph, grad_node.outputs[0], d_logits)
        changed += 1
    return changed


def _shared_inputs(node, slots: int) -> tuple:
    """An update's inputs that are the same for every variable: the rate, then (Adam) the
    step counter and the non-finite flag."""
    return (node.inputs[2], *node.inputs[3 + slots:])


def fuse_optimizer_updates(graph: Graph) -> int:
    """Each group of two or more update ops of one kind that share rate, flag, step and
    hyper-parameters -> one multi-tensor update op; returns how many groups."""

    groups: dict[tuple, list] = {}
    for node in graph.nodes:
        spec = fused.MULTI_UPDATES.get(node.op.name)
        if spec is not None:
            key = (node.op.name, tuple(sorted((k, repr(v)) for k, v in node.attrs.items())),
                   tuple(b.id for b in _shared_inputs(node, spec[1])))
            groups.setdefault(key, []).append(node)
    changed = 0
    for (op_name, _, _), members in groups.items():
        if len(members) < 2:
            continue
        multi_name, slots, reads_step = fused.MULTI_UPDATES[op_name]
        multi = getattr(fused, multi_name)
        columns = [[] for _ in range(2 + slots)]   # params, grads, each slot
        for node in members:
            per_variable = (node.inputs[0], node.inputs[1], *node.inputs[3:3 + slots])
            for column, blob in zip(columns, per_variable):
                column.append(blob)
        first = members[0]
        shared = _shared_inputs(first, slots)
        mark = len(graph.nodes)
        with tracing(graph):
            multi(*[b for column in columns for b in column], *shared,
                  name=f"{multi_name}-{first.name}", count=len(members), **first.attrs)
        _move_traced_nodes(graph, mark, members[-1], members[:-1])
        changed += 1
    return changed


def launches_per_step(plan) -> int:
    """How many kernel launches one step of ``plan`` issues on a device: one per
    instruction whose op launches (fused or not), none for variable reads, host-side ops
    and views. A model of the launch count, not a trace: a generic kernel may launch
    more than one CUDA kernel (the CuPy backend's own kernels launch one each)."""
    return sum(1 for ins in plan.instructions if ins.op_name not in NO_LAUNCH_OPS)
