"""``flow.function_config()``: per-job settings passed to ``@flow.global_function``.

>>> import aioflow as flow
>>> config = flow.function_config()
>>> config.default_data_type(flow.float)
>>> config.train.primary_lr(0.1)
>>> config.train.model_update_conf({"naive_conf": {}})
>>> config.default_data_type() is flow.float32
True
"""
from __future__ import annotations

from . import dtypes

_VIEWS = ("consistent", "mirrored")


class LogicalView:
    """``flow.scope.consistent_view()`` / ``mirrored_view()`` values."""

    def __init__(self, kind: str):
        self.kind = kind

    def __repr__(self) -> str:
        return f"flow.scope.{self.kind}_view()"


class _TrainConfig:
    def __init__(self):
        self._primary_lr = None
        self._model_update = None

    def primary_lr(self, lr=None):
        """Old API: the learning rate of the job's optimizer (with ``add_loss``)."""
        if lr is None:
            return self._primary_lr
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr >= 0:
            raise ValueError(f"train.primary_lr: expected a non-negative number, got {lr!r}")
        self._primary_lr = float(lr)

    def model_update_conf(self, conf=None):
        """Old API: ``{"naive_conf": {}}`` (SGD), ``{"momentum_conf": {"beta": 0.9}}``,
        ``{"adam_conf": {...}}`` or ``{"rmsprop_conf": {...}}``."""
        if conf is None:
            return self._model_update
        if not isinstance(conf, dict) or len(conf) != 1:
            raise ValueError("train.model_update_conf: expected a dict with one key such as "
                             f"{{'naive_conf': {{}}}}, got {conf!r}")
        key = next(iter(conf))
        if key not in ("naive_conf", "momentum_conf", "adam_conf", "rmsprop_conf"):
            raise ValueError("train.model_update_conf: unknown update rule "
                             f"{key!r}; expected naive_conf, momentum_conf, adam_conf or "
                             "rmsprop_conf")
        self._model_update = conf


class FunctionConfig:
    """Settings of one job function. Unknown settings raise ``AttributeError``."""

    def __init__(self):
        self._default_data_type = dtypes.float32
        self._logical_view = LogicalView("consistent")
        self.train = _TrainConfig()
        self._pipeline_depth = None

    def default_data_type(self, dtype=None):
        if dtype is None:
            return self._default_data_type
        self._default_data_type = dtypes.convert(dtype)

    def default_logical_view(self, view=None):
        if view is None:
            return self._logical_view
        if not isinstance(view, LogicalView):
            raise TypeError("default_logical_view: expected flow.scope.consistent_view() or "
                            f"flow.scope.mirrored_view(), got {view!r}")
        self._logical_view = view

    def pipeline_depth(self, depth=None):
        """How many steps may be admitted and unfinished when this job is called (at most
        ``flow.config.pipeline_depth``, the session's); without an argument, the setting
        (None: the session's depth).

        >>> config = FunctionConfig()
        >>> config.pipeline_depth(1)
        >>> config.pipeline_depth()
        1
        """
        if depth is None:
            return self._pipeline_depth
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ValueError(f"function_config.pipeline_depth: expected a positive int, "
                             f"got {depth!r}")
        self._pipeline_depth = depth

    def default_placement_scope(self, scope=None):
        """Accepted for compatibility; placement is taken from ``flow.scope.placement``."""
        return None

    def default_distribute_strategy(self, strategy=None):
        """Accepted for compatibility (single-device execution)."""
        return None

    def __repr__(self) -> str:
        return (f"function_config(default_data_type={self._default_data_type!r}, "
                f"view={self._logical_view!r}, primary_lr={self.train.primary_lr()!r})")


function_config = FunctionConfig
