"""Compile-time checks of a job in a world of several ranks.

Every rank compiles its own copy of each job. MPI pairs the ranks' collectives by
order alone, so if the ranks' graphs differed (another batch size, a layer more, a
variable missing), their all-reduces would pair up wrongly and hang or mix gradients.
Instead the ranks exchange each job's layout (placeholders, the collective ops in plan
order, the gradient buckets) when it is compiled, and a difference raises on every rank.
"""
from __future__ import annotations

from .collectives import allgather_object, require_same
from .graph_ops import COLLECTIVE_OPS


def job_layout(graph) -> dict:
    return {
        "job": graph.name,
        "devices per rank": graph.devices.count if graph.devices is not None else 1,
        "placeholders": [(b.name, tuple(b.shape), b.dtype.name) for b in graph.placeholders],
        "collectives": [n.name for n in graph.nodes if n.op.name in COLLECTIVE_OPS],
        "buckets": graph.allreduce_layout,
    }


def check_job(graph) -> None:
    layouts = allgather_object(job_layout(graph),
                               f"compiling job {graph.name!r} (comparing job layouts)")
    require_same(layouts, f"the layouts of job {graph.name!r}")
