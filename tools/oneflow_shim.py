"""A pytest plugin that lets OneFlow v0.3.4's own op tests import aioflow as ``oneflow``.

Loaded by ``tools/oneflow_tests.py`` (``pytest -p oneflow_shim``); it fetches nothing and
changes nothing on disk. At load it

* makes ``import oneflow`` and ``import oneflow.<sub>`` resolve to ``aioflow`` and
  ``aioflow.<sub>`` (one module object each, so ``flow.typing is oneflow.typing``);
* stands in for ``oneflow_api`` (OneFlow's C++ module, imported by a few tests for its
  ``INVALID_BATCH_AXIS`` constants);
* puts back the numpy-1.x aliases those tests still use (``np.float``, ``np.int``, ...),
  removed in numpy 1.24, and ``np.reshape``'s ``newshape=`` keyword (removed in 2.x), and
  ``collections.Sized`` (Python < 3.10);
* asks the tests to run on the CPU (``ONEFLOW_TEST_CPU_ONLY=1``: OneFlow's own switch);
* collects what unittest would (OneFlow's runner): the methods of ``TestCase`` classes.

When ``ONEFLOW_SHIM_REPORT`` names a file, each test's outcome and, for a failure, the
last line of its error are appended to it as JSON lines, for the runner to count.
"""
from __future__ import annotations

import builtins
import importlib
import importlib.abc
import importlib.util
import json
import os
import sys

import numpy as np

# Removed from numpy in 1.24; OneFlow's tests were written against numpy 1.x.
_NUMPY_ALIASES = {"float": builtins.float, "int": builtins.int, "bool": builtins.bool,
                  "object": builtins.object, "complex": builtins.complex,
                  "str": builtins.str, "long": builtins.int}


class _OneflowAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves ``oneflow`` / ``oneflow.x.y`` to the already imported ``aioflow`` ones."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "oneflow" and not fullname.startswith("oneflow."):
            return None
        real = "aioflow" + fullname[len("oneflow"):]
        if importlib.util.find_spec(real) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return importlib.import_module("aioflow" + spec.name[len("oneflow"):])

    def exec_module(self, module):
        pass   # the aioflow module is already executed


def _oneflow_api_stub():
    """OneFlow's C++ extension module, which some tests import for its constants."""
    import types

    import aioflow
    stub = types.ModuleType("oneflow_api")
    stub.INVALID_BATCH_AXIS = aioflow.INVALID_BATCH_AXIS
    stub.INVALID_SPLIT_AXIS = aioflow.INVALID_BATCH_AXIS   # the same value (-22) in OneFlow
    return stub


def _reshape_taking_newshape(reshape):
    """``np.reshape`` that also takes numpy 1.x's ``newshape=`` keyword (removed in 2.x)."""
    def reshape_(a, *args, newshape=None, **kwargs):
        if newshape is not None:
            args = (newshape, *args)
        return reshape(a, *args, **kwargs)
    reshape_.takes_newshape = True
    return reshape_


def install() -> None:
    sys.modules.setdefault("oneflow_api", _oneflow_api_stub())
    import collections
    import collections.abc
    if not hasattr(collections, "Sized"):   # moved to collections.abc in Python 3.10
        collections.Sized = collections.abc.Sized
    for name, value in _NUMPY_ALIASES.items():
        if name not in np.__dict__:
            setattr(np, name, value)
    if not getattr(np.reshape, "takes_newshape", False):
        try:
            np.reshape(np.zeros(1), newshape=(1,))
        except TypeError:
            np.reshape = _reshape_taking_newshape(np.reshape)
    os.environ.setdefault("ONEFLOW_TEST_CPU_ONLY", "1")
    if not any(isinstance(f, _OneflowAlias) for f in sys.meta_path):
        sys.meta_path.insert(0, _OneflowAlias())


install()


def pytest_collection_modifyitems(items):
    """OneFlow ran these files with unittest, which runs the methods of TestCase classes
    only: module-level helpers named ``test_*`` (test_combined_margin_loss.py's, taking
    ``test_case`` and more) are not tests there, nor here."""
    import unittest
    items[:] = [item for item in items
                if item.cls is not None and issubclass(item.cls, unittest.TestCase)]


def pytest_runtest_logreport(report):
    path = os.environ.get("ONEFLOW_SHIM_REPORT")
    if not path:
        return
    # One record per test: its call phase, or the setup phase when that failed or skipped.
    if report.when != "call" and report.passed:
        return
    reason = ""
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        reason = crash.message if crash is not None else str(report.longrepr)
        reason = reason.strip().splitlines()[0][:300] if reason.strip() else ""
    elif report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2])
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"test": report.nodeid, "outcome": report.outcome,
                              "reason": reason}) + "\n")
