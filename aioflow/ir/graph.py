"""Graph and OpNode: what tracing a job function produces."""
from __future__ import annotations

import itertools
from typing import Any, Sequence

from .blob import Blob


class OpNode:
    """One op application: an op definition, input Blobs, attributes, output Blobs."""

    __slots__ = ("op", "name", "inputs", "attrs", "outputs", "device")

    def __init__(self, op, name: str, inputs: Sequence[Blob], attrs: dict[str, Any], device: str):
        self.op = op
        self.name = name
        self.inputs = tuple(inputs)
        self.attrs = attrs
        self.outputs: tuple[Blob, ...] = ()
        self.device = device

    def __repr__(self) -> str:
        return f"OpNode({self.op.name}, name={self.name!r})"

    def describe(self) -> str:
        """One line: outputs = op(inputs) {attrs}."""
        outs = ", ".join(f"{b.name}: {_fmt(b)}" for b in self.outputs) or "()"
        ins = ", ".join(b.name for b in self.inputs)
        shown = {k: v for k, v in self.attrs.items() if not k.startswith("_")}
        attrs = " " + ", ".join(f"{k}={_short(v)}" for k, v in shown.items()) if shown else ""
        return f"{outs} = {self.op.name}({ins}){attrs}"


def _fmt(blob: Blob) -> str:
    return f"{blob.dtype.name}{list(blob.shape)}"


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class Graph:
    """An ordered list of op nodes (construction order is a valid topological order).

    ``placeholders`` are the job's parameters; ``outputs`` the Blobs it returns. Nodes with
    ``op.side_effect`` (variable updates, counters) are kept by dead-code elimination.
    """

    def __init__(self, name: str = "job"):
        self.name = name
        self.nodes: list[OpNode] = []
        self.placeholders: list[Blob] = []
        self.placeholder_names: dict[int, str] = {}
        self.outputs: list[Blob] = []
        self._blob_ids = itertools.count()
        self._name_counts: dict[str, int] = {}
        self.device = "default"  # flow.scope.placement sets "cpu" or "gpu" (backends/)
        # The number of devices of the innermost flow.scope.placement ("0:0-3": 4): ops
        # run once on whole arrays whatever it is; a data reader splits among them as
        # OneFlow's per-device reader instances did (flow.data.coco_reader).
        self.placement_devices = 1
        # (variable name, Blob) -> the Blob a get_variable in this block returns: set by
        # flow.experimental.scope.config under function_config.enable_ssp (stale reads)
        self.variable_read_hook = None
        self.name_scope: list[str] = []
        self.variable_blobs: dict[str, Blob] = {}
        # get_variable's ``trainable`` as this job declared it: in OneFlow each job's
        # variable op carries its own flag (DCGAN trains the generator in one job and the
        # discriminator in the other, over the same variables).
        self.variable_trainable: dict[str, bool] = {}
        self.new_variables: list[str] = []  # declared for the first time by this trace
        self.legacy_losses: list[Blob] = []  # flow.losses.add_loss (old API)
        self.config = None  # the job's FunctionConfig
        self.job_function = None  # the JobFunction being traced (set by the job compiler)
        self.layer_counts: dict[tuple, int] = {}  # (namespace, default): Dense, Dense_1, ...
        self.regularization_losses: list[Blob] = []
        self.session = None  # the Session tracing this graph (set by the job compiler)
        self.job_type = "predict"
        self.train_target = None  # (optimizer, loss) once minimize() was called
        # What the compiler runs on a train job to add its gradient and update ops: set by
        # the API that names the training target (optimizer.minimize, losses.add_loss), so
        # the compiler below it needs no import of the optimizers.
        self.training_pass = None
        # flow.watch / flow.watch_diff: ("value" | "diff", blob, handler), in call order;
        # their values become outputs after the job's own (CompiledJob.watch_handlers).
        self.watches: list = []
        self.watched_diffs: list = []   # the gradient blobs of the "diff" watches
        # Blobs of data-dependent length (argwhere's): blob id -> (size Blob, axis).
        self.dynamic_dims: dict = {}
        # Placeholders of dynamic (mirrored) parameters, and blobs cast back to a static
        # shape: what Blob.is_dynamic follows (aioflow/engine/dynamic_inputs.py).
        self.dynamic_inputs: set[int] = set()
        self.static_casts: set[int] = set()
        self.batch_axes: dict[int, int | None] = {}   # placeholder id -> declared batch axis
        # Tensor lists (OneFlow's is_tensor_list blobs) and tensor_list_split's outputs,
        # host values of varying shapes: blob id -> what it is, for the error of an op
        # that needs a dense tensor (ops/registry.py, ops/tensor_buffer.py).
        self.tensor_lists: dict[int, str] = {}
        # tp.ListListNumpy placeholders: dense, or tensor lists for the tensor-list ops.
        self.tensor_list_inputs: set[int] = set()
        # flow.repeat / unpack / pack outputs: blob id -> "repeat" | "unpack" | "pack".
        self.micro_batches: dict = {}
        # Set by the layers above while they trace into this graph (declared here so that
        # the graph's fields are all in one place):
        # flow.data readers inside the job (aioflow.data.job_feeds.FeedSource), in order.
        self.feed_sources: list = []
        # In a world of several ranks (aioflow.distributed): placeholder id -> the batch
        # axis split over the ranks; the all-reduce buckets' layout, compared across ranks
        # at compile time; the step counter the collectives are numbered by.
        self.split_axes: dict[int, int] = {}
        self.allreduce_layout: list = []
        self.step_counter = None
        # Several devices in one process (aioflow.distributed.devices): the job's devices
        # (a JobDevices; None while a job is traced for one device alone), and the prefix
        # of the op names traced for device 1 and up ("device1-"), so that the parts'
        # ops keep distinct names while their variables keep the same ones; the blobs
        # those parts computed (what is device 0's alone leaves them out).
        self.devices = None
        self.device_prefix = ""
        self.other_devices: set[int] = set()   # ids of the blobs of devices 1 and up

    # -- construction ------------------------------------------------------------------
    def new_blob(self, shape, dtype, producer=None, index=0) -> Blob:
        return Blob(self, next(self._blob_ids), shape, dtype, producer, index)

    def add_placeholder(self, shape, dtype, name: str) -> Blob:
        blob = self.new_blob(shape, dtype)
        self.placeholders.append(blob)
        self.placeholder_names[blob.id] = name
        return blob

    def namespace_prefix(self) -> str:
        """``"a-b-"`` inside ``flow.scope.namespace("a")`` and ``("b")``, else ``""``: what
        OneFlow puts before every op and variable name created there (its
        ``GetJobNameScopePrefix``), so two namespaces never share a name."""
        return "".join(f"{scope}-" for scope in self.name_scope)

    def unique_name(self, base: str) -> str:
        """``base`` the first time, then ``base_1``, ``base_2``... within the current
        namespace of this graph; without the namespace prefix, which ``add_node`` and
        ``get_variable`` put before every name they are given."""
        key = self.namespace_prefix() + base
        count = self._name_counts.get(key, 0)
        self._name_counts[key] = count + 1
        return base if count == 0 else f"{base}_{count}"

    def naming_state(self) -> tuple[dict, dict]:
        """The counters that name ops and layers, to restore (:meth:`restore_naming`)
        before the job is traced again for another device: the same names, so the same
        variables."""
        return dict(self._name_counts), dict(self.layer_counts)

    def restore_naming(self, state: tuple[dict, dict]) -> None:
        self._name_counts, self.layer_counts = dict(state[0]), dict(state[1])

    def add_node(self, op, inputs: Sequence[Blob], attrs: dict[str, Any], name: str | None,
                 out_specs: Sequence[tuple]) -> OpNode:
        for blob in inputs:
            if not isinstance(blob, Blob):
                raise TypeError(f"op {op.name}: expected Blob inputs, got {type(blob).__name__}")
            if blob.graph is not self:
                raise ValueError(
                    f"op {op.name}: input {blob.name} belongs to another job's graph; Blobs "
                    "cannot cross job functions"
                )
        # An explicit name gets the namespace prefix too, as OneFlow's user ops did.
        name = (self.device_prefix + self.namespace_prefix()
                + (name or self.unique_name(op.name)))
        node = OpNode(op, name, inputs, attrs, self.device)
        node.outputs = tuple(
            self.new_blob(shape, dtype, node, i) for i, (shape, dtype) in enumerate(out_specs)
        )
        self.nodes.append(node)
        return node

    # -- inspection --------------------------------------------------------------------
    def __str__(self) -> str:
        lines = [f"graph {self.name}("
                 + ", ".join(f"{b.name}: {_fmt(b)}" for b in self.placeholders) + ") {"]
        lines += ["  " + node.describe() for node in self.nodes]
        lines.append("  return " + ", ".join(b.name for b in self.outputs))
        lines.append("}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Graph {self.name}: {len(self.nodes)} ops>"

    def consumers(self) -> dict[int, list[OpNode]]:
        """blob id -> nodes that read it."""
        users: dict[int, list[OpNode]] = {}
        for node in self.nodes:
            for blob in node.inputs:
                users.setdefault(blob.id, []).append(node)
        return users
