"""The process-wide TensorBoard writer behind ``flow.summary``: one event file per logdir,
written by tensorboardX (a small, pure-Python writer on protobuf), not by aioflow.

OneFlow kept one summary writer per process, opened by ``create_summary_writer(logdir)``
and used by every ``summary.*`` op after it; so does aioflow. Events are appended to the
file as they come (buffered by the file object; ``flush_summary_writer`` writes them out).
"""
from __future__ import annotations

import atexit
import importlib
import os
import threading
import time
import types

_lock = threading.Lock()
_writer = None   # tensorboardX.SummaryWriter, once create_summary_writer ran


def tensorboardx():
    """The tensorboardX module, or an ImportError saying how to install it."""
    try:
        import tensorboardX
    except ImportError as err:   # pragma: no cover - the test extra installs it
        raise ImportError("flow.summary writes TensorBoard files with tensorboardX: "
                          "pip install 'aioflow[summary]'") from err
    return tensorboardX


_PROTOS = ("api_pb2", "attr_value_pb2", "graph_pb2", "plugin_hparams_pb2", "summary_pb2",
           "tensor_pb2", "tensor_shape_pb2", "types_pb2")


def protos() -> types.SimpleNamespace:
    """tensorboardX's protobuf modules (TensorBoard's own message types), by name."""
    tensorboardx()
    return types.SimpleNamespace(**{name: importlib.import_module(f"tensorboardX.proto.{name}")
                                    for name in _PROTOS})


class EventFile:
    """One TensorBoard event file in ``logdir``, written synchronously: tensorboardX's
    ``EventsWriter`` (its record framing and CRCs) without SummaryWriter's queue thread,
    whose ``flush()`` leaves queued events unwritten; here a flush is a barrier."""

    def __init__(self, logdir: str):
        os.makedirs(logdir, exist_ok=True)
        self.logdir = logdir
        module = importlib.import_module("tensorboardX.event_file_writer")
        self._events = module.EventsWriter(os.path.join(logdir, "events"))
        self._event_type = importlib.import_module("tensorboardX.proto.event_pb2").Event

    def add_summary(self, summary, step) -> None:
        event = self._event_type(summary=summary, wall_time=time.time())
        if step is not None:
            event.step = int(step)
        self._events.write_event(event)

    def add_graph_def(self, graph_def) -> None:
        self._events.write_event(self._event_type(graph_def=graph_def.SerializeToString(),
                                                  wall_time=time.time()))

    @property
    def filename(self) -> str:
        return self._events._file_name

    def flush(self) -> None:
        self._events.flush()

    def close(self) -> None:
        self._events.close()


def open_writer(logdir) -> None:
    """Open (or keep) the writer of ``logdir``; another logdir closes the previous one."""
    global _writer
    if not isinstance(logdir, (str, os.PathLike)) or not os.fspath(logdir):
        raise TypeError(f"flow.summary.create_summary_writer: logdir must be a non-empty "
                        f"path, got {logdir!r}")
    logdir = os.path.abspath(os.fspath(logdir))
    tensorboardx()
    with _lock:
        if _writer is not None and _writer.logdir == logdir:
            return
        if _writer is not None:
            _writer.close()
        _writer = EventFile(logdir)


def current(what: str) -> EventFile:
    """The open writer; a clear error naming ``what`` when none was created."""
    writer = _writer
    if writer is None:
        raise RuntimeError(f"flow.summary.{what}: no summary writer; call "
                           "flow.summary.create_summary_writer(logdir) first")
    return writer


def flush() -> None:
    """Write buffered events to disk (nothing when no writer is open)."""
    writer = _writer
    if writer is not None:
        writer.flush()


def close() -> None:
    """Flush and close the writer (a later create_summary_writer opens a new file)."""
    global _writer
    with _lock:
        writer, _writer = _writer, None
    if writer is not None:
        writer.close()


atexit.register(close)   # the last buffered events reach the file at interpreter exit
