"""Reading a job function's signature: parameter placeholders and the return annotation.

The return annotation becomes a small tree (:class:`ReturnSpec`). After tracing, the
function's returned object is matched against it (:func:`flatten_result`), which yields the
Blobs to compute and a template; after a step, :func:`rebuild_result` puts the arrays back
into that template.
"""
from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import annotations as tp
from ..ir import Blob

LEAF_KINDS = {tp.Numpy: "numpy", tp.ListNumpy: "list_numpy", tp.ListListNumpy: "list_list_numpy"}


class LegacyBlob(np.ndarray):
    """An ndarray that also answers OneFlow's old ``.ndarray()`` / ``.numpy()`` calls, and
    ``is_dynamic`` (the watched blob's, for a watch handler's value)."""

    is_dynamic = False

    def ndarray(self, parallel_id: int | None = None) -> np.ndarray:
        """The array; ``parallel_id`` (OneFlow's device index of a mirrored value) may be
        0, the one device here."""
        if parallel_id not in (None, 0):
            raise IndexError(f"numpy(parallel_id={parallel_id!r}): the value has one device "
                             "part, parallel_id 0")
        return self.view(np.ndarray)

    numpy = ndarray

    def numpy_list(self) -> list:
        """OneFlow's mirrored result: one array per device (one device here)."""
        return [self.ndarray()]

    def numpy_lists(self) -> list:
        """OneFlow's tensor-list result: per device, the list's arrays."""
        array = self.ndarray()
        return [list(array.reshape(-1))] if array.dtype == object else [[array]]

    ndarray_list, ndarray_lists = numpy_list, numpy_lists   # OneFlow 0.2's names


# -- parameters ----------------------------------------------------------------------------


@dataclass
class Parameter:
    name: str
    spec: Any  # PlaceholderSpec, or a tuple of them
    kind: Any = inspect.Parameter.POSITIONAL_OR_KEYWORD  # as in inspect.Parameter

    @property
    def positional(self) -> bool:
        return self.kind is not inspect.Parameter.KEYWORD_ONLY

    @property
    def by_keyword(self) -> bool:
        return self.kind is not inspect.Parameter.POSITIONAL_ONLY


def bind_arguments(params: list[Parameter], args, kwargs, name: str) -> dict:
    """Map a call's ``args``/``kwargs`` to parameter names, as Python would; TypeError if not.

    ``name`` begins every message (the job's name, or a wrapper's).

    >>> p = [Parameter("x", None), Parameter("y", None)]
    >>> bind_arguments(p, (1,), {"y": 2}, "job")
    {'x': 1, 'y': 2}
    >>> bind_arguments(p, (1,), {}, "job")
    Traceback (most recent call last):
    TypeError: job() missing argument(s): y
    """
    positional = [p for p in params if p.positional]
    if len(args) > len(positional):
        what = "arguments" if len(positional) == len(params) else "positional arguments"
        raise TypeError(f"{name}() takes {len(positional)} {what} "
                        f"({', '.join(p.name for p in positional)}), got {len(args)}")
    values = dict(zip((p.name for p in positional), args))
    for key, value in kwargs.items():
        if key not in {p.name for p in params if p.by_keyword}:
            raise TypeError(f"{name}() got an unexpected argument {key!r}")
        if key in values:
            raise TypeError(f"{name}() got multiple values for argument {key!r}")
        values[key] = value
    missing = [p.name for p in params if p.name not in values]
    if missing:
        raise TypeError(f"{name}() missing argument(s): {', '.join(missing)}")
    return values


def read_parameters(fn, legacy_defaults_allowed: bool = True) -> list[Parameter]:
    sig = inspect.signature(fn)
    hints = _annotations(fn)
    params = []
    for p in sig.parameters.values():
        where = f"job function {fn.__name__!r}, parameter {p.name!r}"
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"{where}: *args and **kwargs are not allowed; declare each input "
                            "with a placeholder annotation")
        spec = hints.get(p.name, inspect.Parameter.empty)
        if spec is inspect.Parameter.empty and isinstance(p.default, tp.PlaceholderSpec):
            spec = p.default  # old API: images=flow.FixedTensorDef(shape, dtype)
        if spec is inspect.Parameter.empty:
            raise TypeError(f"{where}: missing annotation; annotate it with e.g. "
                            "tp.Numpy.Placeholder((batch, ...), dtype=flow.float)")
        params.append(Parameter(p.name, _parameter_spec(spec, where), p.kind))
    return params


def _parameter_spec(spec, where):
    if isinstance(spec, tp.PlaceholderSpec):
        return spec
    if typing.get_origin(spec) is tuple:
        return tuple(_parameter_spec(s, f"{where}[{i}]")
                     for i, s in enumerate(typing.get_args(spec)))
    raise TypeError(f"{where}: expected a placeholder such as tp.Numpy.Placeholder(shape, "
                    f"dtype) or a Tuple of them, got {spec!r}")


def _annotations(fn) -> dict:
    try:
        return typing.get_type_hints(fn)
    except Exception:  # resolve one by one, to name the annotation that fails
        pass
    hints = {}
    for key, value in getattr(fn, "__annotations__", {}).items():
        if isinstance(value, str):  # from __future__ import annotations
            try:
                value = eval(value, getattr(fn, "__globals__", {}))  # noqa: S307
            except Exception as exc:
                what = "return annotation" if key == "return" else f"parameter {key!r}"
                hint = ("; with 'from __future__ import annotations', annotations may only "
                        "use names defined at module level" if isinstance(exc, NameError) else "")
                raise TypeError(f"job function {fn.__name__!r}, {what}: cannot evaluate the "
                                f"annotation {value!r} ({type(exc).__name__}: {exc}){hint}"
                                ) from None
        hints[key] = value
    return hints


# -- return annotation ----------------------------------------------------------------------


@dataclass
class ReturnSpec:
    tree: Any  # ("leaf", kind) | ("tuple", [..]) | ("seq", tree) | ("dict", tree)
    #             | ("bundle", kind) | ("none",) | ("legacy",)
    callback: bool = False

    @property
    def is_legacy(self) -> bool:
        return self.tree[0] == "legacy"

    @property
    def is_none(self) -> bool:
        return self.tree[0] == "none"


def read_return(fn) -> ReturnSpec:
    hints = _annotations(fn)
    if "return" not in hints:
        return ReturnSpec(("legacy",))
    annotation = hints["return"]
    where = f"job function {fn.__name__!r}, return annotation"
    if tp.is_wrapper(annotation, tp.Callback):
        inner = annotation.arg
        if inner is None or inner is type(None):
            raise TypeError(f"{where}: Callback[T] needs a result type T, got None")
        if tp.is_wrapper(inner, tp.Callback):
            raise TypeError(f"{where}: Callback cannot be nested")
        return ReturnSpec(_return_tree(inner, where), callback=True)
    if annotation is tp.Callback:
        raise TypeError(f"{where}: use Callback[T] with the result type T, e.g. "
                        "tp.Callback[tp.Numpy]")
    if annotation is None or annotation is type(None):
        return ReturnSpec(("none",))
    return ReturnSpec(_return_tree(annotation, where))


def _return_tree(annotation, where):
    if annotation in LEAF_KINDS:
        return ("leaf", LEAF_KINDS[annotation])
    if annotation is tp.Dict:
        return ("dict", ("leaf", "numpy"))
    if tp.is_wrapper(annotation, tp.Bundle):
        if annotation.arg not in LEAF_KINDS:
            raise TypeError(f"{where}: Bundle[T] needs T to be tp.Numpy, tp.ListNumpy or "
                            f"tp.ListListNumpy, got {annotation.arg!r}")
        return ("bundle", LEAF_KINDS[annotation.arg])
    if tp.is_wrapper(annotation, tp.Callback):
        raise TypeError(f"{where}: Callback[...] is only allowed as the outermost annotation")
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return ("seq", _return_tree(args[0], where), tuple)
        return ("tuple", [_return_tree(a, where) for a in args])
    if origin is list:
        if len(args) != 1:
            raise TypeError(f"{where}: List needs exactly one item type, got {annotation!r}")
        return ("seq", _return_tree(args[0], where), list)
    if origin is dict:
        if len(args) != 2:
            raise TypeError(f"{where}: Dict needs key and value types, got {annotation!r}")
        return ("dict", _return_tree(args[1], where))
    raise TypeError(
        f"{where}: unsupported annotation {annotation!r}; use tp.Numpy, tp.ListNumpy, "
        "tp.ListListNumpy, tp.Dict, tp.Bundle[T], tp.Callback[T], None, or Tuple/List/Dict of "
        "them")


def flatten_result(spec: ReturnSpec, value, fn_name: str):
    """Match the traced ``value`` to ``spec``: returns (blobs, template)."""
    blobs: list[Blob] = []
    # A job of the old API may return nothing (OneFlow's own examples: a job that only
    # creates a summary writer); its .get() is then None.
    if spec.is_none or (spec.is_legacy and value is None):
        if spec.is_none and value is not None:
            raise TypeError(f"job function {fn_name!r} is annotated '-> None' but returned "
                            f"{type(value).__name__}")
        return blobs, None
    tree = ("bundle", "legacy") if spec.is_legacy else spec.tree
    template = _flatten(tree, value, blobs, f"job function {fn_name!r} result")
    return blobs, template


def _leaf(value, blobs, kind, path):
    if not isinstance(value, Blob):
        raise TypeError(f"{path}: expected a Blob (annotated {kind}), got "
                        f"{type(value).__name__}")
    held = value.graph.tensor_lists.get(value.id, "")
    if held.startswith("a tensor list") and kind not in ("list_list_numpy", "legacy"):
        raise TypeError(f"{path}: {value.name!r} is {held}: annotate it tp.ListListNumpy "
                        f"(one list of arrays per device), not {kind}")
    blobs.append(value)
    return ("$", len(blobs) - 1, kind)


def _flatten(tree, value, blobs, path):
    tag = tree[0]
    if tag == "leaf":
        return _leaf(value, blobs, tree[1], path)
    if tag == "tuple":
        items = tree[1]
        if not isinstance(value, (tuple, list)) or len(value) != len(items):
            got = (f"{type(value).__name__} of length {len(value)}"
                   if isinstance(value, (tuple, list)) else type(value).__name__)
            raise TypeError(f"{path}: annotated as a tuple of {len(items)}, got {got}")
        return tuple(_flatten(t, v, blobs, f"{path}[{i}]") for i, (t, v) in
                     enumerate(zip(items, value)))
    if tag == "seq":
        if not isinstance(value, (tuple, list)):
            raise TypeError(f"{path}: annotated as a {tree[2].__name__}, got "
                            f"{type(value).__name__}")
        return tree[2](_flatten(tree[1], v, blobs, f"{path}[{i}]") for i, v in enumerate(value))
    if tag == "dict":
        if not isinstance(value, dict):
            raise TypeError(f"{path}: annotated as a dict, got {type(value).__name__}")
        return {k: _flatten(tree[1], v, blobs, f"{path}[{k!r}]") for k, v in value.items()}
    if tag == "bundle":
        if isinstance(value, (tuple, list)):
            return type(value)(_flatten(tree, v, blobs, f"{path}[{i}]")
                               for i, v in enumerate(value))
        if isinstance(value, dict):
            return {k: _flatten(tree, v, blobs, f"{path}[{k!r}]") for k, v in value.items()}
        return _leaf(value, blobs, tree[1], path)
    raise AssertionError(tag)


def rebuild_result(template, arrays):
    """Put computed arrays back into the returned structure, converting each leaf. A
    mirrored (list) leaf's value is one array (a job of one device) or the list of every
    device's array (:func:`aioflow.distributed.views.device_values`)."""
    if template is None:
        return None
    if isinstance(template, tuple) and template and template[0] == "$":
        _, index, kind = template
        array = arrays[index]
        if kind == "numpy":
            return array
        if kind in ("list_numpy", "list_list_numpy"):
            parts = array if isinstance(array, list) else [array]
            if kind == "list_numpy":
                return parts
            # a tensor list (ops/tensor_buffer.py) gives its tensors
            return [list(a.reshape(-1)) if a.dtype == object else [a] for a in parts]
        return array.view(LegacyBlob)
    if isinstance(template, dict):
        return {k: rebuild_result(v, arrays) for k, v in template.items()}
    return type(template)(rebuild_result(v, arrays) for v in template)
