"""``flow.watch`` and ``flow.watch_diff``: look at a blob's value, or its gradient, at
every step.

Called inside a job function, they register a handler for a blob of the job. The blob's
value (or, in a train job, the gradient of the loss with respect to it) becomes a hidden
output of the step; when the step's result is handed over, the handlers receive those
values as numpy arrays, in the order they were registered, where the result is delivered:
in the calling thread for a blocking call, on the awaiting loop for ``await``, and just
before the callback of the Callback form, where it runs (the delivery thread, the caller's
loop, or the calling thread for a short callback of a step run there). A
handler runs once per step, whether or not the step's result is used.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> seen = []
>>> @flow.global_function(type="predict")
... def double(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
...     y = x * 2
...     flow.watch(y, seen.append)
...     return y + 1
>>> double(np.array([1.0, 2.0], np.float32))
array([3., 5.], dtype=float32)
>>> seen
[array([2., 4.], dtype=float32)]
"""
from __future__ import annotations

from typing import Callable

from .ir import Blob, current_graph, is_tracing

__all__ = ["watch", "watch_diff"]


def watch(blob_watched: Blob, handler_or_prompt: Callable | str | None = None) -> None:
    """Hand ``blob_watched``'s value to ``handler_or_prompt(value)`` at every step; a string
    (or None) prints the value after that prompt (or the blob's name) instead."""
    _register("value", blob_watched, handler_or_prompt, "watch")


def watch_diff(blob_watched: Blob, handler_or_prompt: Callable | str | None = None) -> None:
    """Hand the gradient of the job's loss with respect to ``blob_watched`` (the same
    shape) to ``handler_or_prompt(gradient)`` at every step of a train job; a string (or
    None) prints it. A blob the loss does not depend on gets zeros."""
    _register("diff", blob_watched, handler_or_prompt, "watch_diff")


def _register(kind: str, blob, handler_or_prompt, what: str) -> None:
    if not is_tracing():
        raise RuntimeError(f"flow.{what}: call it inside a job function (while it is traced)")
    if not isinstance(blob, Blob):
        raise TypeError(f"flow.{what}: blob_watched must be a blob of the job, got "
                        f"{type(blob).__name__}")
    graph = current_graph()
    if blob.graph is not graph:
        raise ValueError(f"flow.{what}: blob_watched belongs to another job's graph")
    if kind == "diff" and graph.job_type != "train":
        raise TypeError(f"flow.watch_diff in job {graph.name!r}: gradients exist only in "
                        "a train job (type='train')")
    if kind == "diff" and not blob.dtype.is_floating:
        raise TypeError(f"flow.watch_diff: blob_watched must be floating point to have a "
                        f"gradient, got {blob.dtype.name}")
    graph.watches.append((kind, blob, _handler(handler_or_prompt, blob, what)))


def _handler(handler_or_prompt, blob, what: str) -> Callable:
    if callable(handler_or_prompt):
        return handler_or_prompt
    if handler_or_prompt is not None and not isinstance(handler_or_prompt, str):
        raise TypeError(f"flow.{what}: handler_or_prompt must be a callable, a string or "
                        f"None, got {type(handler_or_prompt).__name__}")
    prompt = handler_or_prompt if handler_or_prompt is not None else _blob_name(blob)

    def show(value) -> None:
        print(prompt, value, flush=True)
    return show


def _blob_name(blob) -> str:
    return blob.name
