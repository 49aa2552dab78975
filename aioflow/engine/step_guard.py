"""Reporting train steps skipped by the non-finite guard (see :mod:`aioflow.ops.state`).

A train step whose loss or gradients hold NaN or infinity, or values whose squares
overflow (so that the step could write infinity), applies no update: variables,
optimizer slots, batch normalization statistics and the step counter keep their values.
The first skip of a job in a session warns (:class:`NonFiniteStepWarning`, naming the job,
the call that brought the batch and the step counter); every skip is counted in
:func:`skipped_steps`.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> flow.clear_default_session()
>>> @flow.global_function(type="train")
... def fit(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
...     w = flow.get_variable("w", shape=(2,), initializer=flow.ones_initializer())
...     loss = flow.math.reduce_sum(flow.math.exp(x * w))
...     flow.optimizer.SGD(0.1, momentum=0).minimize(loss)
...     return loss
>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     _ = fit(np.array([1.0, 500.0], np.float32))     # exp overflows: loss is inf
>>> print(caught[0].message)  # doctest: +ELLIPSIS
train job 'fit': the batch of call 1 of this job in this session gave non-finite loss or gradients ... at step 0; no update applied...
>>> flow.train.skipped_steps(fit), flow.get_all_variables()["w"].tolist()
(1, [1.0, 1.0])
"""
from __future__ import annotations

import logging
import warnings

from ..ops.state import on_skipped_step
from .session import default_session

__all__ = ["NonFiniteStepWarning", "skipped_steps", "note_skipped"]

log = logging.getLogger("aioflow")


class NonFiniteStepWarning(RuntimeWarning):
    """A train step's loss or gradients were not finite; it applied no update."""


def note_skipped(session, job: str, step: int, warn: bool = True,
                 call: int | None = None) -> None:
    """Count a skipped step of ``job`` (called by the step counter's increment); ``warn``
    False for jobs whose skips are part of the plan (a dynamic loss scale shrinking after
    an overflow), which are only counted and logged. ``call``: which call of the job in
    this session brought the bad batch (1 for the first)."""
    count = session.skipped_steps.get(job, 0) + 1
    session.skipped_steps[job] = count
    batch = f"the batch of call {call} of this job in this session" if call else "a batch"
    log.debug("aioflow: train job %r skipped a step with non-finite loss or gradients: %s "
              "(step counter %d, %d skipped so far)", job, batch, step, count)
    if count == 1 and warn:
        warnings.warn(
            f"train job {job!r}: {batch} gave non-finite loss or gradients (NaN, infinity, "
            f"or values whose squares overflow) at step {step}; no update applied "
            "(variables, optimizer state and the step counter are unchanged). Later skips "
            f"of this job are only counted: flow.train.skipped_steps({job})",
            NonFiniteStepWarning, stacklevel=2)


def skipped_steps(job) -> int:
    """How many steps of the train job ``job`` (the job function or its name) the
    non-finite guard skipped in the default session."""
    name = job if isinstance(job, str) else getattr(job, "__name__", None)
    if not isinstance(name, str):
        raise TypeError(f"skipped_steps: expected a job function or its name, got {job!r}")
    return default_session().skipped_steps.get(name, 0)


on_skipped_step(note_skipped)
