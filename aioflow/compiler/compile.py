"""One lifecycle from a traced graph to a plan: ``compile(graph, options, backend)``.

The traced graph holds the user's forward ops and, for a train job, its training target.
Compiling it for a backend runs, in order:

1. forward rewrites (``options["fusion"]``), each only where the backend has a kernel for
   the ops it produces (the fused convolution + pooling is a CPU kernel); on backends
   bound by launches (``options["launch_fusion"]``, :mod:`.launch_fusion`) bias + relu;
2. for train jobs, the gradient and update ops (autodiff works on the rewritten forward
   graph, so the backward pass is derived from the cheaper forward); on backends bound by
   launches the cross entropy merged with its gradient and one update op per optimizer;
3. dead-code elimination, side effects last, :func:`verify`;
4. a kernel for every op on the backend (else :class:`MissingKernelError`, naming both);
5. the plan (:func:`build_plan`): flat instructions over preallocated buffers;

In a world of several ranks the engine then has the ranks compare their jobs' collective
layouts (:mod:`aioflow.distributed.checks`), so a mismatch raises instead of hanging.

Options: ``fusion``, ``launch_fusion``, ``memory_plan``, ``kernel_threading``,
``cuda_graphs`` (read by the CuPy backend's step, :mod:`aioflow.backends.graph_capture`)
and the ops' compile options (``conv_algorithm``); missing ones take their defaults.
"""
from __future__ import annotations

from typing import Any

from ..ir import Graph, tracing
from . import launch_fusion
from .fusion import fuse_conv_max_pool, pool_before_bias_relu
from .passes import eliminate_dead_code, schedule_side_effects_last, verify
from .plan import Plan, build_plan
from ..ops import REGISTRY

DEFAULT_OPTIONS = {"fusion": True, "memory_plan": True, "kernel_threading": "auto",
                   "conv_algorithm": "auto", "launch_fusion": "auto", "cuda_graphs": True}


def compile(graph: Graph, options: dict[str, Any], backend) -> Plan:  # noqa: A001
    """Rewrite, differentiate, verify and plan ``graph`` for ``backend`` (in place)."""
    options = {**DEFAULT_OPTIONS, **options}
    with tracing(graph):
        if options["fusion"]:
            pool_before_bias_relu(graph)
            if REGISTRY["conv2d_max_pool2d"].has_kernel(backend.kernel_set):
                fuse_conv_max_pool(graph)
        fuse_launches = options["fusion"] and launch_fusion.enabled(
            options["launch_fusion"], backend)
        if fuse_launches:
            launch_fusion.fuse_bias_relu(graph)
        if graph.job_type == "train":
            if graph.training_pass is None:
                raise RuntimeError(
                    f"train job {graph.name!r} has no training target: call "
                    "flow.optimizer.SGD(...).minimize(loss) (or flow.losses.add_loss) inside "
                    "it, or declare it with type='predict'")
            graph.training_pass(graph)
            if fuse_launches:
                launch_fusion.fuse_cross_entropy_gradient(graph)
            # function_config.enable_fuse_model_update_ops(True / False) decides for its
            # job; unset (None), the launch fusions' choice does.
            fuse_updates = options.get("fuse_model_update")
            if options["fusion"] and (fuse_launches if fuse_updates is None else fuse_updates):
                launch_fusion.fuse_optimizer_updates(graph)
        graph.outputs += graph.watched_diffs   # flow.watch_diff, after the job's own
    eliminate_dead_code(graph)
    schedule_side_effects_last(graph)
    verify(graph)
    for node in graph.nodes:
        node.op.kernel(backend.kernel_set)   # raises MissingKernelError naming op and backend
    plan = build_plan(graph, memory_plan=options["memory_plan"],
                      kernel_threading=options["kernel_threading"],
                      options=options, backend=backend)
    return plan
