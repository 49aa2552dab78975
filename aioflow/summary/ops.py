"""``flow.summary.scalar`` / ``histogram`` / ``image`` / ``pb`` and the writer ops.

In OneFlow these are ops of a job: ``value``, ``step`` and ``tag`` are blobs (the tag an
int8 blob of the name's ASCII bytes), and every step of the job writes one event. So it
is here: inside a job function the blobs' values reach the writer at every step, on the
result's delivery path (as ``flow.watch`` delivers them), in step order. aioflow also
takes plain values -- ``tag="loss"``, ``step=3`` -- and, called outside a job, writes at
once (numpy arrays or numbers), which suits callbacks.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> flow.summary.create_summary_writer("logs")     # TensorBoard: tensorboard --logdir logs
>>> @flow.global_function(type="predict")
... def log_mean(x: tp.Numpy.Placeholder((4,)), step: tp.Numpy.Placeholder((1,), dtype=flow.int64)) -> tp.Numpy:
...     mean = flow.math.reduce_mean(x)
...     flow.summary.scalar(mean, step, "mean")
...     return mean
>>> for i in range(3):
...     _ = log_mean(np.full(4, i, np.float32), np.array([i]))
>>> flow.summary.flush_summary_writer()
"""
from __future__ import annotations

import numpy as np

from ..ir import Blob, is_tracing
from . import writer as _writer
from ..oneflow_ops import ops_api
from ..engine.watch import watch

__all__ = ["create_summary_writer", "flush_summary_writer", "scalar", "histogram", "image",
           "pb"]


def create_summary_writer(logdir, name=None) -> None:
    """Open the process's TensorBoard writer on ``logdir`` (created if missing); the
    ``summary.*`` ops write there. In a job it opens when the job runs, as in OneFlow;
    outside a job, at once. The same logdir again keeps the open file; another one closes
    it and starts a new event file there."""
    _each_step("create_summary_writer", [], lambda: _writer.open_writer(logdir),
               now=lambda: _writer.open_writer(logdir))


def flush_summary_writer(name=None) -> None:
    """Write the buffered events to disk (each step of a job, or at once outside one)."""
    _each_step("flush_summary_writer", [], _writer.flush, now=_writer.flush)


def scalar(value, step, tag, name=None) -> None:
    """Write ``value`` (one element: float, double, int32 or int64) as the scalar ``tag``
    at ``step`` (one int64 element). ``tag``: an int8 blob of the tag's bytes, as OneFlow
    took it, or a str."""
    _require_one("scalar", "value", value)
    _summary_op("scalar", value, step, tag, _write_scalar)


def histogram(value, step, tag, name=None) -> None:
    """Write the distribution of ``value``'s elements (any shape, a numeric dtype) as the
    histogram ``tag`` at ``step`` (TensorBoard's Histograms and Distributions tabs)."""
    _summary_op("histogram", value, step, tag, _write_histogram)


def image(value, step=None, tag=None, name=None) -> None:
    """Write the images of ``value`` (uint8, ``(N, H, W, C)`` or ``(H, W, C)`` with C 1, 3
    or 4) under ``tag`` (default "image") at ``step``."""
    if isinstance(value, (Blob, np.ndarray)) and (value.ndim not in (3, 4)
                                                  or value.shape[-1] not in (1, 3, 4)):
        raise ValueError("flow.summary.image: value must be (N, H, W, C) or (H, W, C) with "
                         f"C in (1, 3, 4), got shape {tuple(value.shape)}")
    _summary_op("image", value, step, "image" if tag is None else tag, _write_image)


def pb(value, step=None, name=None) -> None:
    """Write a ``Summary`` protocol buffer: ``value`` holds its text form as int8 bytes
    (``np.frombuffer(str(summary).encode(), np.int8)``, what OneFlow's ``summary.pb``
    parsed; trailing zero bytes, e.g. padding up to the placeholder's length, are
    ignored) or its binary form; outside a job a ``Summary`` message itself works too.
    ``flow.summary.text`` and ``flow.summary.hparams`` build such messages."""
    _summary_op("pb", value, step, "", lambda summary, step_, _tag: _write_pb(summary, step_))


# -- the writes ---------------------------------------------------------------------------
def _write_scalar(value, step, tag) -> None:
    summary = _builders().scalar(tag, float(np.asarray(value).reshape(-1)[0]))
    _writer.current("scalar").add_summary(summary, step)


def _write_histogram(value, step, tag) -> None:
    summary = _builders().histogram(tag, np.asarray(value, np.float64), bins="auto")
    _writer.current("histogram").add_summary(summary, step)


def _write_image(value, step, tag) -> None:
    value = np.asarray(value)
    if value.ndim == 3:
        value = value[None]
    summary = _builders().image(tag, value, dataformats="NHWC")
    _writer.current("image").add_summary(summary, step)


def _builders():
    """tensorboardX's Summary builders (scalar, histogram, image: TensorBoard's layouts)."""
    _writer.tensorboardx()
    import tensorboardX.summary
    return tensorboardX.summary


def _write_pb(value, step) -> None:
    summary_type = _writer.protos().summary_pb2.Summary
    if isinstance(value, summary_type):
        summary = value
    else:
        summary = _parse_summary(np.asarray(value).astype(np.uint8).tobytes().rstrip(b"\0"),
                                 summary_type)
    _writer.current("pb").add_summary(summary, step)


def _parse_summary(data: bytes, summary_type):
    from google.protobuf import message, text_format
    try:
        return text_format.Parse(data.decode("utf-8"), summary_type())
    except (text_format.ParseError, UnicodeDecodeError):
        summary = summary_type()
        try:
            summary.ParseFromString(data)
        except message.DecodeError:
            raise ValueError("flow.summary.pb: value holds neither the text form nor the "
                             "binary form of a Summary message") from None
        return summary


# -- plumbing: the same write at every step of a job, or at once ----------------------------
def _summary_op(what, value, step, tag, write) -> None:
    if step is not None:
        _require_one(what, "step", step)
    if isinstance(tag, (Blob, np.ndarray)) and np.dtype(tag.dtype if not isinstance(
            tag, Blob) else tag.dtype.numpy).kind not in "iu":
        raise TypeError(f"flow.summary.{what}: tag must be a str or an int8 blob of its "
                        f"bytes, got dtype {tag.dtype}")
    elif not isinstance(tag, (Blob, np.ndarray, str)):
        raise TypeError(f"flow.summary.{what}: tag must be a str or an int8 blob of its "
                        f"bytes, got {type(tag).__name__}")
    counter = _StepCounter()

    def run(value_, step_, tag_) -> None:
        write(value_, counter.step(step_), _tag_text(tag_))

    _each_step(what, [value, step, tag], run, now=lambda: run(value, step, tag))


def _each_step(what, args: list, fn, now) -> None:
    """Inside a job: call ``fn(*args)`` at every step with the blobs' values (plain values
    as they are). Outside: ``now()``."""
    if not is_tracing():
        if any(isinstance(a, Blob) for a in args):
            raise RuntimeError(f"flow.summary.{what}: blobs exist only inside a job function")
        now()
        return
    blobs = [a for a in args if isinstance(a, Blob)]
    if not blobs:   # nothing of the job to wait for: a tiny constant marks each step
        blobs = [ops_api.constant(0, dtype=np.int8, shape=(1,))]
    received: list = []

    def collect(value) -> None:
        received.append(value)
        if len(received) == len(blobs):
            values = iter(received[:])
            received.clear()
            fn(*[next(values) if isinstance(a, Blob) else a for a in args])

    for blob in blobs:
        watch(blob, collect)


class _StepCounter:
    """``step=None``: 0, 1, 2, ... for successive writes of this op."""

    def __init__(self):
        self.next = 0

    def step(self, step) -> int:
        if step is None:
            self.next += 1
            return self.next - 1
        return int(np.asarray(step).reshape(-1)[0])


def _tag_text(tag) -> str:
    if isinstance(tag, str):
        return tag
    return np.asarray(tag).astype(np.uint8).tobytes().rstrip(b"\0").decode("utf-8")


def _require_one(what: str, arg: str, value) -> None:
    if isinstance(value, (Blob, np.ndarray)):
        size = int(np.prod(value.shape))
        if size != 1:
            raise ValueError(f"flow.summary.{what}: {arg} must hold one element, got shape "
                             f"{tuple(value.shape)}")
    elif not isinstance(value, (int, float, np.number)) or isinstance(value, bool):
        raise TypeError(f"flow.summary.{what}: {arg} must be a blob, an array or a number, "
                        f"got {type(value).__name__}")
