"""The update op of ``flow.optimizer.loss_scale.dynamic_loss_scale``: after each train step,
grow or shrink the loss scale from the step's non-finite flag (OneFlow's
``dynamic_loss_scale_schedule`` kernel).

* Finite step: one more good step; after ``increment_period`` of them in a row the scale is
  multiplied by ``multiplier`` (at most float32's largest value) and the count restarts.
* Non-finite step (its update was skipped): the scale is divided by ``multiplier`` (at
  least 1) and the count restarts.

Written against ``xp`` on 0-d arrays, so the scale stays on the device: no host read.
"""
from __future__ import annotations

import numpy as np

from .registry import register

_LARGEST = float(np.finfo(np.float32).max)


@register("dynamic_loss_scale_update", infer=lambda *inputs, **attrs: [], side_effect=True,
          differentiable=False)
def dynamic_loss_scale_update(ctx, scale, good_steps, flag, *, increment_period, multiplier):
    xp = ctx.xp
    ok = xp.asarray(flag).astype(bool)
    good = xp.where(ok, good_steps + 1, 0)
    grow = ok & (good >= increment_period)
    t = scale.dtype.type
    grown = xp.minimum(scale.astype(np.float64) * multiplier, _LARGEST).astype(scale.dtype)
    shrunk = xp.maximum(scale / t(multiplier), t(1))
    new_scale = xp.where(grow, grown, xp.where(ok, scale, shrunk))
    xp.copyto(scale, new_scale)
    xp.copyto(good_steps, xp.where(grow, 0, good).astype(good_steps.dtype))
