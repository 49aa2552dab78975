"""``aioflow.python``: OneFlow's module paths ``oneflow.python.ops.*`` and
``oneflow.python.framework.*``, for scripts that import them rather than the names.

``from aioflow.python.ops import nn_ops`` or ``import aioflow.python.framework.distribute
as distribute_util`` gives a module whose attributes are the functions OneFlow v0.3.4's
module of that name defined, each resolved to the aioflow object of the ``flow.*`` name
OneFlow exported it as (``nn_ops.conv2d`` is ``flow.nn.conv2d``; ``distribute.split`` is
``flow.distribute.split``). ``oneflow_modules.txt`` holds the table, read from OneFlow's
``@oneflow_export`` decorators. A name aioflow does not offer raises ``AttributeError``
naming it.

>>> from aioflow.python.ops import reduce_ops
>>> import aioflow as flow
>>> reduce_ops.reduce_sum is flow.math.reduce_sum
True
"""
from __future__ import annotations

import pathlib
import importlib.machinery
import sys
import types

from ..oneflow_ops import transpose_util

# OneFlow's modules whose helpers its code imports by path and never exported as flow.*
_HELPER_MODULES = {"ops.transpose_util": transpose_util}

_TABLE = pathlib.Path(__file__).with_name("oneflow_modules.txt")


def _read_table() -> dict[str, dict[str, list[str]]]:
    """``{"ops.nn_ops": {"conv2d": ["nn.conv2d"], ...}, ...}``."""
    modules: dict[str, dict[str, list[str]]] = {}
    for line in _TABLE.read_text().splitlines():
        if line and not line.startswith("#"):
            module, name, *exports = line.split()
            modules.setdefault(module, {})[name] = exports
    return modules


def _resolve(export: str):
    import aioflow   # the root package, which imports this one: read at first use
    obj = aioflow
    for part in export.split("."):
        obj = getattr(obj, part)
    return obj


class OneFlowModule(types.ModuleType):
    """One of OneFlow's modules: its function names, resolved lazily to aioflow's."""

    def __init__(self, name: str, exports: dict[str, list[str]]):
        super().__init__(name, f"OneFlow's module {name.removeprefix('aioflow.')}, "
                               "resolved to aioflow's names.")
        self._exports = exports
        self.__all__ = sorted(exports)

    def __getattr__(self, name: str):
        exports = self.__dict__.get("_exports", {}).get(name)
        if exports is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        for export in exports:
            try:
                return _resolve(export)
            except AttributeError:
                continue
        raise AttributeError(f"{self.__name__}.{name} (flow.{exports[0]} in OneFlow) is not "
                             "offered by aioflow (docs/porting.md)")

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._exports))


def _install() -> None:
    """Register every module of the table under ``aioflow.python.<package>.<module>`` in
    ``sys.modules`` (so ``import`` statements find them) and as package attributes."""
    packages = {}
    for package in ("ops", "framework"):
        full = f"{__name__}.{package}"
        module = types.ModuleType(full, f"OneFlow's oneflow.python.{package} modules.")
        module.__path__ = []   # a package: its submodules come from sys.modules
        # a spec, as imported modules have: importlib.util.find_spec reads it
        module.__spec__ = importlib.machinery.ModuleSpec(full, None, is_package=True)
        sys.modules[full] = packages[package] = module
        globals()[package] = module
    for dotted, exports in _read_table().items():
        package, module_name = dotted.split(".")
        full = f"{__name__}.{dotted}"
        module = OneFlowModule(full, exports)
        module.__spec__ = importlib.machinery.ModuleSpec(full, None)
        sys.modules[full] = module
        setattr(packages[package], module_name, module)
    for dotted, module in _HELPER_MODULES.items():
        package, module_name = dotted.split(".")
        sys.modules[f"{__name__}.{dotted}"] = module
        setattr(packages[package], module_name, module)


_install()
