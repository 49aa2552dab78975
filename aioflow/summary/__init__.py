"""``flow.summary``: TensorBoard event files (OneFlow's ``summary`` namespace), and
``flow.summary(job)``, aioflow's table of a compiled job (:mod:`aioflow.engine.model_summary`).

The module is callable so that both spellings keep working. Writing goes through
tensorboardX (``pip install 'aioflow[summary]'``); see ``docs/api/summary.md`` and
``tensorboard --logdir <logdir>``.
"""
from __future__ import annotations

import sys
import types

from .graph import Graph, Projector
from .hparams import HParam, Hparam, IntegerRange, Metric, RealRange, ValueSet, hparams, text
from .ops import (create_summary_writer, flush_summary_writer, histogram, image, pb, scalar)
from ..engine.model_summary import summary

__all__ = ["create_summary_writer", "flush_summary_writer", "scalar", "histogram", "image",
           "pb", "text", "hparams", "HParam", "Hparam", "IntegerRange", "RealRange",
           "ValueSet", "Metric", "Graph", "Projector"]


class _CallableModule(types.ModuleType):
    def __call__(self, job, print_: bool = True):
        """``flow.summary(job)``: what a compiled job computes, op by op, and what it costs
        (:func:`aioflow.engine.model_summary.summary`)."""
        return summary(job, print_)


sys.modules[__name__].__class__ = _CallableModule
