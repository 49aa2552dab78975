"""The op registry: one :class:`OpDef` per primitive, holding its three rules side by side.

* ``infer(*input_blobs, **attrs) -> [(shape, dtype), ...]``: the shape rule, run at trace
  time; it raises ``ValueError``/``TypeError`` naming the op for bad inputs.
* ``forward(ctx, *arrays, **attrs)``: the kernel, written against ``ctx.xp`` (numpy or
  cupy); returns one array or a tuple (one per output). It serves every backend unless
  the op says otherwise: ``backends=("numpy",)`` limits it to those (a CPU-only kernel),
  and ``@op.kernel_for("cupy")`` adds a backend's own, faster kernel beside it.
* ``grad(node, *output_grads) -> [input_grad or None, ...]``: the gradient rule, which
  builds more ops (so autodiff is graph-to-graph and backward passes are compiled too).

Ops take numeric Blobs only, unless registered with ``host_values=True`` (the tensor-buffer
and tensor-list ops): a Blob of ``flow.tensor_buffer`` or ``flow.record`` dtype, or a
tensor list (:mod:`aioflow.ops.tensor_buffer`), given to any other op raises a TypeError
naming the op and the Blob at trace time.

Registering an op puts it in the op test matrix (``tests/ops``). Lookups fail loudly:
an unknown op or a missing gradient raises with the op's name at trace/compile time, and
compiling a job for a backend that one of its ops has no kernel for raises
:class:`MissingKernelError` naming the op and the backend.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ..ir import Blob, current_graph
from .._core import dtypes

REGISTRY: dict[str, "OpDef"] = {}


class MissingKernelError(NotImplementedError):
    """An op of a job has no kernel for the backend the job was compiled for."""


class OpDef:
    """A primitive op. See the module docstring for the rule signatures."""

    def __init__(self, name: str, infer: Callable, forward: Callable, *,
                 side_effect: bool = False, differentiable: bool = True,
                 writes_out: bool = False, splits_batch: bool = False,
                 compile_options: dict[str, str] | None = None,
                 backends: tuple[str, ...] | None = None, host_values: bool = False):
        self.name = name
        self.infer = infer
        self.forward = forward
        # Backend name -> kernel. ``forward`` serves the backends named here, or every
        # backend (written against ctx.xp) when ``backends`` is None.
        self.kernels: dict[str, Callable] = (
            {} if backends is None else {b: forward for b in backends})
        self.generic = backends is None
        self.grad_rule: Callable | None = None
        self.side_effect = side_effect
        self.differentiable = differentiable
        # The kernel also takes ``out=``: a C-contiguous array of its (single) output's
        # shape and dtype to write the result into, which may be the very memory of one of
        # its inputs (an elementwise ufunc reads each element before writing it). The
        # compiler's memory plan (compiler/memory.py) then reuses buffers across ops and
        # steps instead of allocating a fresh array per op per step.
        self.writes_out = writes_out
        # The kernel is GEMM-heavy and splits its batch over the parallel workers itself
        # when the step holds the BLAS at one thread (kernels/parallel.py); a plan with
        # such an op runs that way by default (flow.config.kernel_threading("auto")).
        self.splits_batch = splits_batch
        # Kernel keyword -> the flow.config setting the compiler passes as its value: a
        # choice that does not change the op's meaning (e.g. the convolution algorithm),
        # fixed when a job is compiled, so it is not part of the traced node's attrs.
        self.compile_options = dict(compile_options or {})
        # Takes host values (tensor buffers, tensor lists) as inputs; other ops refuse them.
        self.host_values = host_values

    def kernel_for(self, backend: str) -> Callable[[Callable], Callable]:
        """Decorator: ``backend``'s own kernel for this op (same signature as forward)."""
        def wrap(kernel: Callable) -> Callable:
            self.kernels[backend] = kernel
            return kernel
        return wrap

    def kernel(self, backend: str) -> Callable:
        """The kernel this op runs on ``backend``; raises :class:`MissingKernelError`."""
        kernel = self.kernels.get(backend)
        if kernel is not None:
            return kernel
        if self.generic:
            return self.forward
        raise MissingKernelError(
            f"op {self.name!r} has no kernel for the {backend!r} backend (it has: "
            f"{', '.join(sorted(self.kernels))}); place the job on another device")

    def has_kernel(self, backend: str) -> bool:
        return self.generic or backend in self.kernels

    def grad(self, rule: Callable) -> Callable:
        """Decorator: attach the gradient rule."""
        self.grad_rule = rule
        return rule

    def __repr__(self) -> str:
        return f"<op {self.name}>"

    def __call__(self, *inputs: Blob, name: str | None = None, **attrs: Any):
        """Apply the op inside the job being traced; returns a Blob or a tuple of Blobs."""
        graph = current_graph()
        if not self.host_values:
            _refuse_host_values(self.name, graph, inputs)
        specs = self.infer(*inputs, **attrs)
        node = graph.add_node(self, inputs, attrs, name, specs)
        return node.outputs[0] if len(node.outputs) == 1 else node.outputs


def register(name: str, infer: Callable, *, side_effect: bool = False,
             differentiable: bool = True, writes_out: bool = False,
             splits_batch: bool = False,
             compile_options: dict[str, str] | None = None,
             backends: tuple[str, ...] | None = None,
             host_values: bool = False) -> Callable[[Callable], OpDef]:
    """Decorator over a forward kernel: ``@register("relu", infer=same_shape)``."""

    def wrap(forward: Callable) -> OpDef:
        if name in REGISTRY:
            raise ValueError(f"op {name!r} is registered twice")
        op = OpDef(name, infer, forward, side_effect=side_effect,
                   differentiable=differentiable, writes_out=writes_out,
                   splits_batch=splits_batch, compile_options=compile_options,
                   backends=backends, host_values=host_values)
        REGISTRY[name] = op
        return op

    return wrap


def get(name: str) -> OpDef:
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"no op named {name!r} is registered") from None


def _refuse_host_values(op_name: str, graph, inputs) -> None:
    for blob in inputs:
        if not isinstance(blob, Blob):
            continue
        what = graph.tensor_lists.get(blob.id)
        if what is not None:
            hint = ("convert it with flow.tensor_list_to_tensor_buffer and "
                    "flow.tensor_buffer_to_tensor, or return it from the job"
                    if what.startswith("a tensor list") else "return it from the job "
                    "(aioflow has no dynamic shapes for ops to work on it)")
            raise TypeError(f"op {op_name}: input {blob.name!r} is {what}, but {op_name} needs "
                            f"a dense tensor of a static shape; {hint}")
        dtypes.require_numeric(blob.dtype, f"op {op_name}", f"input {blob.name!r}")


# -- shape-rule helpers shared by op families ---------------------------------------------
def same_as_first(x: Blob, *rest, **attrs) -> Sequence[tuple]:
    return [(x.shape, x.dtype)]


def require_float(op_name: str, blob: Blob, arg: str = "x") -> None:
    if not blob.dtype.is_floating:
        raise TypeError(f"{op_name}: {arg} must be a floating-point Blob, got {blob.dtype.name}")


def normalize_axis(op_name: str, axis: int, ndim: int) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"{op_name}: axis {axis} is out of range for a {ndim}-d Blob")
    return axis % max(ndim, 1)
