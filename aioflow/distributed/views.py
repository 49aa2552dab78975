"""OneFlow's two views of a job's data, in a world of several ranks.

* Mirrored view (``tp.ListNumpy``): an argument is a list with one array per rank;
  rank ``r`` computes on element ``r`` (each element has the placeholder's shape). A
  ``tp.ListNumpy`` result is the list of every rank's value, the same on every rank.
* Consistent view (``tp.Numpy``): a placeholder with a batch axis would hold the
  logical batch, to be split over the ranks. aioflow does not split it yet: such a job is
  refused when it is compiled in a world of several ranks, with the fix (ListNumpy)
  named. A placeholder declared with ``batch_axis=None`` is replicated: every rank must
  pass the same value, and a ``tp.Numpy`` result is this rank's own value.
"""
from __future__ import annotations

from .state import world


def check_placeholder(spec, name: str, job_name: str) -> None:
    """Refuse a consistent-view placeholder with a batch axis in a world of several."""
    current = world()
    if current.distributed and spec.kind == "numpy" and spec.batch_axis is not None:
        raise NotImplementedError(
            f"job function {job_name!r}, parameter {name!r}: a tp.Numpy placeholder with a "
            f"batch axis (consistent view) in a world of {current.size} ranks would be "
            "split along its batch axis, which aioflow does not do yet. Use the mirrored "
            f"view: tp.ListNumpy.Placeholder(per-rank shape) and pass a list of "
            f"{current.size} arrays, one per rank (or declare batch_axis=None for a value "
            "every rank passes whole)")


def rank_element(items, spec, name: str, fn_name: str):
    """This rank's element of a mirrored argument (checks there is one per rank)."""
    current = world()
    if not isinstance(items, (list, tuple)) or len(items) != current.size:
        from ..inputs import _describe
        raise TypeError(
            f"{fn_name}() argument {name!r}: {spec.kind} placeholder expects a list with "
            f"one array per rank ({current.size} rank{'s' if current.size > 1 else ''}), "
            f"got {_describe(items)}")
    return items[current.rank]


def output_kinds(template) -> list[str]:
    """The leaf kinds of a flattened result template, in output order."""
    kinds: dict[int, str] = {}

    def walk(node):
        if isinstance(node, tuple) and node and node[0] == "$":
            kinds[node[1]] = node[2]
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, (list, tuple)):
            for value in node:
                walk(value)
    walk(template)
    return [kinds[i] for i in sorted(kinds)]
