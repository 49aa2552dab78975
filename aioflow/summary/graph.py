"""``flow.summary.Graph`` and ``flow.summary.Projector``: the jobs' graphs and embeddings,
for TensorBoard's Graphs and Projector tabs.

OneFlow wrote these in formats of its own board (``structure_graph.json``, projector
protobufs). aioflow writes what TensorBoard reads: the compiled jobs as a ``GraphDef``
event in ``<logdir>/graph``, and embeddings through tensorboardX's projector files in
``<logdir>/projector``.
"""
from __future__ import annotations

import os

import numpy as np

from .writer import EventFile, protos, tensorboardx
from ..engine import session as session_mod

__all__ = ["Graph", "Projector"]


def _subdir(logdir, sub: str, what: str) -> str:
    if logdir is None:
        raise ValueError(f"flow.summary.{what}: logdir must not be None")
    path = os.path.join(os.fspath(logdir), sub)
    os.makedirs(path, exist_ok=True)
    return path


class Graph:
    """``Graph(logdir).write_structure_graph()`` writes the graph of every job compiled in
    the default session (one name scope per job; each op with its inputs, output shapes
    and dtypes) to an event file in ``<logdir>/graph``."""

    def __init__(self, logdir=None):
        self.logdir = _subdir(logdir, "graph", "Graph")
        self.structure_graph_filename = None

    def write_structure_graph(self) -> None:
        if self.structure_graph_filename is not None:
            raise OSError("flow.summary.Graph: the structure graph was written already; "
                          "create another Graph to write it again")
        session = session_mod.default_session()
        session.compile_all()
        # one graph per job: as declared (not the variants traced for dynamic arguments)
        graph_def = job_graphs_def([c.graph for c in session.compiled.values()
                                    if c.dynamic_shapes is None])
        events = EventFile(self.logdir)
        events.add_graph_def(graph_def)
        events.close()
        self.structure_graph_filename = events.filename


def job_graphs_def(graphs):
    """A TensorFlow-style ``GraphDef`` (tensorboardX's proto) of aioflow job graphs."""
    proto = protos()
    graph_def = proto.graph_pb2.GraphDef()
    for graph in graphs:
        names = {}

        def node_name(blob):
            return names.get(blob.id, f"{graph.name}/{blob.name}")

        for blob in graph.placeholders:
            names[blob.id] = f"{graph.name}/{graph.placeholder_names[blob.id]}"
            _add_node(proto, graph_def, names[blob.id], "placeholder", [], [blob])
        for node in graph.nodes:
            name = f"{graph.name}/{node.name}"
            for i, blob in enumerate(node.outputs):
                names[blob.id] = name if len(node.outputs) == 1 else f"{name}:{i}"
            _add_node(proto, graph_def, name, node.op.name,
                      [node_name(b).split(":")[0] for b in node.inputs], node.outputs)
    return graph_def


def _add_node(proto, graph_def, name, op, inputs, outputs) -> None:
    shapes = proto.attr_value_pb2.AttrValue.ListValue(shape=[
        proto.tensor_shape_pb2.TensorShapeProto(
            dim=[proto.tensor_shape_pb2.TensorShapeProto.Dim(size=int(d)) for d in b.shape])
        for b in outputs])
    attrs = {"_output_shapes": proto.attr_value_pb2.AttrValue(list=shapes)}
    if outputs:
        attrs["dtype"] = proto.attr_value_pb2.AttrValue(s=outputs[0].dtype.name.encode())
    graph_def.node.add(name=name, op=op, input=inputs, attr=attrs)


class Projector:
    """Embeddings for TensorBoard's Projector tab, in ``<logdir>/projector``.

    ``embedding_projector(value, label=None, tag=None, step=None, sample_name=None,
    sample_type=None, x=None)`` writes the rows of ``value`` (N points; further axes are
    flattened), ``label`` (N labels) as their metadata and, for ``sample_type="image"``,
    ``x`` (N images, ``(N, H, W)``, ``(N, H, W, C)``) as their thumbnails.
    ``exception_projector`` writes the same way (OneFlow's board showed it apart; TensorBoard
    has one projector) under the tag "exception_projector".
    """

    def __init__(self, logdir=None):
        self.logdir = _subdir(logdir, "projector", "Projector")
        self.embedding_filename = self.exception_filename = None
        self._writer = None

    def create_embedding_projector(self) -> None:
        self.embedding_filename = self.logdir

    def create_exception_projector(self) -> None:
        self.exception_filename = self.logdir

    def embedding_projector(self, value=None, label=None, tag=None, step=None,
                            sample_name=None, sample_type=None, x=None) -> None:
        self._write(value, label, tag or "embedding_projector", step, sample_type, x)

    def exception_projector(self, value=None, tag=None, step=None, sample_name=None,
                            sample_type=None, x=None) -> None:
        self._write(value, None, tag or "exception_projector", step, sample_type, x)

    def _write(self, value, label, tag, step, sample_type, x) -> None:
        value = np.asarray(value)
        if value.ndim < 1 or not value.size:
            raise ValueError("flow.summary.Projector: value must hold at least one point, got "
                             f"shape {value.shape}")
        points = value.reshape(len(value), -1)
        if sample_type not in (None, "image", "IMAGE", "audio", "AUDIO", "text", "TEXT"):
            raise ValueError("flow.summary.Projector: sample_type must be 'image', 'audio' or "
                             f"'text', got {sample_type!r}")
        images = None
        if x is not None and str(sample_type).lower() == "image":
            images = np.asarray(x)
            if images.ndim == 3:
                images = images[:, None]
            elif images.ndim == 4:
                images = images.transpose(0, 3, 1, 2)   # NHWC -> NCHW for tensorboardX
            images = images.astype(np.float32) / (255.0 if images.dtype == np.uint8 else 1.0)
        if self._writer is None:
            self._writer = tensorboardx().SummaryWriter(self.logdir)
        metadata = None if label is None else [str(v) for v in np.asarray(label).reshape(-1)]
        self._writer.add_embedding(points, metadata=metadata, label_img=images,
                                   global_step=step, tag=tag)
        self._writer.flush()
