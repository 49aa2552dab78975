"""``flow.watch`` and ``flow.watch_diff``: look at a blob's value, or its gradient, at
every step.

Called inside a job function, they register a handler for a blob of the job. The blob's
value (or, in a train job, the gradient of the loss with respect to it, its diff seeded
with ones as OneFlow does) becomes a hidden output of the step; when the step's result is
handed over, the handlers receive those values in the order they were registered, in the
form their parameter's annotation asks for, as OneFlow's watchers do: ``tp.Numpy`` an
ndarray, ``tp.ListNumpy`` a list of one array per device, ``tp.ListListNumpy`` a list of
lists; no annotation a blob-like value (an ndarray that also has ``.numpy()`` and
``.numpy_list()``, as OneFlow's local blob does). They run where the result is delivered:
in the calling thread for a blocking call, on the awaiting loop for ``await``, and just
before the callback of the Callback form, where it runs (the delivery thread, the caller's
loop, or the calling thread for a short callback of a step run there). A
handler runs once per step, whether or not the step's result is used.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> seen = []
>>> def keep(value: tp.Numpy):
...     seen.append(value)
>>> @flow.global_function(type="predict")
... def double(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
...     y = x * 2
...     flow.watch(y, keep)
...     flow.watch(x, lambda blob: seen.append(blob.numpy_list()))
...     return y + 1
>>> double(np.array([1.0, 2.0], np.float32))
array([3., 5.], dtype=float32)
>>> seen
[array([2., 4.], dtype=float32), [array([1., 2.], dtype=float32)]]
"""
from __future__ import annotations

import inspect
from typing import Callable

import numpy as np

from . import annotations as tp
from ..ir import Blob, current_graph, is_tracing
from .signature import LegacyBlob

__all__ = ["watch", "watch_diff"]


def watch(blob_watched: Blob, handler_or_prompt: Callable | str | None = None) -> None:
    """Hand ``blob_watched``'s value to ``handler_or_prompt(value)`` at every step; a string
    (or None) prints the value after that prompt (or the blob's name) instead."""
    _register("value", blob_watched, handler_or_prompt, "watch")


def watch_diff(blob_watched: Blob, handler_or_prompt: Callable | str | None = None) -> None:
    """Hand the gradient of the job's loss with respect to ``blob_watched`` (the same
    shape) to ``handler_or_prompt(gradient)`` at every step of a train job; a string (or
    None) prints it. As in OneFlow, the loss's diff is seeded with ones: a per-sample loss
    gives each sample's own gradient (``minimize`` divides only the diffs of the model
    variables by the sample count). A blob the loss does not depend on gets zeros; an
    integer blob its diff of its dtype, as OneFlow differentiates it."""
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
    graph.watches.append((kind, blob, _handler(handler_or_prompt, blob, what)))


def _handler(handler_or_prompt, blob, what: str) -> Callable:
    if callable(handler_or_prompt):
        return _by_annotation(handler_or_prompt, what, blob.is_dynamic)
    if handler_or_prompt is not None and not isinstance(handler_or_prompt, str):
        raise TypeError(f"flow.{what}: handler_or_prompt must be a callable, a string or "
                        f"None, got {type(handler_or_prompt).__name__}")
    prompt = handler_or_prompt if handler_or_prompt is not None else _blob_name(blob)

    def show(value) -> None:
        print(prompt, value, flush=True)
    return show


def _blob_name(blob) -> str:
    return blob.name


# What a handler annotated with each type receives, from the step's ndarray (one device).
_FORMS = {tp.Numpy: lambda array: array,
          tp.ListNumpy: lambda array: [array],
          tp.ListListNumpy: lambda array: [[array]]}


def _by_annotation(handler: Callable, what: str, dynamic: bool = False) -> Callable:
    """``handler`` wrapped to receive the form its one parameter's annotation names
    (OneFlow's ``TransformWatchedBlob``); TypeError for an annotation OneFlow refuses."""
    try:
        # eval_str: annotations written under ``from __future__ import annotations``
        parameters = list(inspect.signature(handler, eval_str=True).parameters.values())
    except (TypeError, ValueError):   # a builtin without a signature: no annotation
        parameters = []
    except NameError as exc:   # a string annotation naming nothing the handler sees
        raise TypeError(f"flow.{what}: the handler's parameter annotation cannot be "
                        f"resolved: {exc}") from None
    annotation = parameters[0].annotation if parameters else inspect.Parameter.empty
    if annotation is inspect.Parameter.empty:
        def legacy(array):
            value = np.asarray(array).view(LegacyBlob)
            value.is_dynamic = dynamic     # the watched blob's, as OneFlow's blob object
            return handler(value)
        return legacy
    form = _FORMS.get(annotation)
    if form is None:
        raise TypeError(f"flow.{what}: the handler's parameter annotation must be "
                        "tp.Numpy, tp.ListNumpy or tp.ListListNumpy (or none), got "
                        f"{annotation!r}")
    return lambda array: handler(form(array))
