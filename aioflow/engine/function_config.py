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

from .._core import dtypes
from .._core.deprecation import mark_deprecated
from . import function_settings as _fs
from .._core.warn import warn_once

_VIEWS = ("consistent", "mirrored")


_view_stack: list[str] = []   # views of the open ``with flow.scope.*_view():`` blocks


class LogicalView:
    """``flow.scope.consistent_view()`` / ``mirrored_view()`` values: for
    ``function_config.default_logical_view``, or, as in OneFlow, a context manager making
    ``flow.scope.*_view_enabled()`` answer for its block."""

    def __init__(self, kind: str):
        self.kind = kind

    def __enter__(self):
        _view_stack.append(self.kind)
        return self

    def __exit__(self, *exc) -> None:
        _view_stack.pop()

    def __repr__(self) -> str:
        return f"flow.scope.{self.kind}_view()"


def _setter(values: dict, setting: _fs.Setting):
    """OneFlow's setter of ``setting``, recording into ``values``."""
    public = f"function_config.{setting.name}"

    def set_value(value=_fs._REQUIRED):
        if value is _fs._REQUIRED:
            if setting.bare is _fs._REQUIRED:
                raise TypeError(f"{public}() needs a value")
            value = setting.bare
        values[setting.name] = setting.check(public, value)
        if setting.why:
            warn_once(public, f"{public}({value!r}) has no effect in aioflow: {setting.why}")
    set_value.__name__ = setting.name.rpartition(".")[2]
    set_value.__doc__ = (f"OneFlow's ``{public}``: " + (f"no effect ({setting.why})."
                                                        if setting.why else "applied."))
    return set_value


class _SettingGroup:
    """The setters under one dotted prefix (``config.qat.symmetric``...)."""

    def __init__(self, values: dict, prefix: str):
        self._values, self._prefix = values, prefix

    def __getattr__(self, name: str):
        setting = _fs.SETTINGS.get(f"{self._prefix}.{name}")
        if setting is None or name.startswith("_"):
            raise AttributeError(f"function_config.{self._prefix} has no setting {name!r}")
        return _setter(self._values, setting)

    def __dir__(self):
        return [n.rpartition(".")[2] for n in _fs.SETTINGS if n.startswith(self._prefix + ".")]


class _MemoryPolicyList(_SettingGroup):
    """``static_mem_alloc_policy_white_list``: OneFlow's memory allocation policies, kept as
    a set (no effect in aioflow: it plans its buffers itself)."""

    def __init__(self, values: dict):
        super().__init__(values, "static_mem_alloc_policy_white_list")
        values.setdefault("static_mem_alloc_policy_white_list", set(_fs.MEMORY_POLICIES))

    def has(self, policy) -> bool:
        return policy in self._values["static_mem_alloc_policy_white_list"]

    def add(self, policy) -> None:
        self.__getattr__("add")(_check_policy(policy))
        self._values["static_mem_alloc_policy_white_list"].add(policy)

    def remove(self, policy) -> None:
        self.__getattr__("remove")(_check_policy(policy))
        self._values["static_mem_alloc_policy_white_list"].discard(policy)

    def policy_mem_size_first(self) -> str:
        return "use_mem_size_first_algo"

    def policy_mutual_exclusion_first(self) -> str:
        return "use_mutual_exclusion_first_algo"

    def policy_time_line(self) -> str:
        return "use_time_line_algo"


def _check_policy(policy):
    if policy not in _fs.MEMORY_POLICIES:
        raise ValueError(f"static_mem_alloc_policy_white_list: policy must be one of "
                         f"{', '.join(_fs.MEMORY_POLICIES)}, got {policy!r}")
    return policy


class _AlgoList:
    """``static_mem_alloc_algo_white_list.show()``: the policies' names, as OneFlow."""

    def show(self) -> list:
        return list(_fs.MEMORY_POLICIES)


class _TrainConfig(_SettingGroup):
    def __init__(self, values: dict):
        super().__init__(values, "train")
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
    """Settings of one job function: every setter of OneFlow v0.3.4's ``FunctionConfig``
    (those not defined here in :mod:`aioflow.engine.function_settings`). Unknown settings raise
    ``AttributeError``."""

    def __init__(self):
        self._default_data_type = dtypes.float32
        self._logical_view = LogicalView("consistent")
        self._values: dict = {}   # the settings of aioflow.engine.function_settings, as set
        self.train = _TrainConfig(self._values)
        self.static_mem_alloc_policy_white_list = _MemoryPolicyList(self._values)
        self.static_mem_alloc_algo_white_list = _AlgoList()
        self.qat = _SettingGroup(self._values, "qat")
        self.tensorrt = _SettingGroup(self._values, "tensorrt")
        self._pipeline_depth = None

    def __getattr__(self, name: str):
        setting = _fs.SETTINGS.get(name)
        if setting is None or name.startswith("_"):
            raise AttributeError(f"function_config has no setting {name!r} (OneFlow "
                                 "v0.3.4's setters are listed in aioflow.engine.function_settings)")
        return _setter(self.__dict__.setdefault("_values", {}), setting)

    @property
    def function_desc(self) -> "_SettingsView":
        """OneFlow's ``func_config.function_desc``: the settings as set so far, by name
        (``func_config.function_desc.enable_inplace`` is True after
        ``func_config.enable_inplace()``)."""
        return _SettingsView(self)

    def setting(self, name: str):
        """The value of a setting of :mod:`aioflow.engine.function_settings` (dotted for the
        grouped ones, ``"qat.symmetric"``): as last set, else its initial value."""
        if name not in _fs.SETTINGS:
            raise KeyError(f"function_config.setting: no setting {name!r}")
        return self._values.get(name, _fs.SETTINGS[name].initial)

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
        """Accepted for compatibility; placement is taken from ``flow.scope.placement``,
        and a job's devices from ``flow.config.gpu_device_num`` / ``cpu_device_num``."""
        return None

    @mark_deprecated
    def default_distribute_strategy(self, strategy=None):
        """OneFlow's older name of :meth:`default_logical_view`.

        >>> import aioflow as flow
        >>> config = FunctionConfig()
        >>> config.default_distribute_strategy(flow.scope.mirrored_view())
        >>> config.default_logical_view()
        flow.scope.mirrored_view()
        """
        return self.default_logical_view(strategy)

    def __repr__(self) -> str:
        return (f"function_config(default_data_type={self._default_data_type!r}, "
                f"view={self._logical_view!r}, primary_lr={self.train.primary_lr()!r})")


function_config = FunctionConfig


class _SettingsView:
    """``FunctionConfig.function_desc``: each setting of the config read as an attribute
    (its value as last set, else its initial value), as OneFlow's FunctionDesc reads its
    job config."""

    def __init__(self, config: FunctionConfig):
        self.job_config = config

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in _fs.SETTINGS:
            raise AttributeError(f"function_desc: no setting {name!r}")
        return self.job_config.setting(name)

    def __repr__(self) -> str:
        return f"function_desc({self.job_config._values!r})"
