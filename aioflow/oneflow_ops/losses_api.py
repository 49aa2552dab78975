"""``flow.losses.add_loss``' definition (OneFlow's older API): declare a train job's loss.

With ``config.train.primary_lr(lr)`` and ``config.train.model_update_conf(...)`` in the
job's function_config, the job trains to reduce every added loss (each averaged over its
elements, as ``minimize`` does).
"""
from __future__ import annotations

from ..ir import Blob, current_graph, is_tracing
from ..optimizer import build_training

__all__ = ["add_loss"]


def add_loss(loss: Blob) -> None:
    if not is_tracing():
        # OneFlow's api_add_loss has only a lazy (in a job) and an eager form; outside a
        # job neither applies and enable_if raises NotImplementedError
        raise NotImplementedError("flow.losses.add_loss: only inside a job function (OneFlow "
                                  "has no form of it outside one)")
    if not isinstance(loss, Blob):
        raise TypeError(f"add_loss: expected a Blob, got {type(loss).__name__}")
    graph = current_graph()
    graph.legacy_losses.append(loss)
    graph.training_pass = build_training
