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
* collects what unittest would (OneFlow's runner): the methods of ``TestCase`` classes;
* puts back, for the oracles and helpers the tests import, what they relied on in
  TensorFlow 2.3 and numpy 1.x (before each test, once each is imported): TensorFlow's
  channels-first ``tf.nn.avg_pool*d`` / ``max_pool*d`` (its CPU kernels refuse NCHW:
  the shim pools channels-last and transposes, the same numbers), Keras optimizers that
  take an int learning rate (Keras 3 refuses ``learning_rate=1``), dilated
  ``tf.nn.conv1d`` / ``conv3d`` (its CPU kernels refuse dilation > 1: the shim convolves
  with the filter spread out by zeros, the same convolution), and ``test_util``'s
  ``"gpu" in`` a list of arrays (numpy 2 raises on the array comparison).

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


_CHANNELS_FIRST = {"NCW": "NWC", "NCHW": "NHWC", "NCDHW": "NDHWC"}


def _channels_last_pool(pool):
    """``pool`` taking a channels-first ``data_format`` by pooling channels-last."""
    import tensorflow as tf

    def pool_(input, ksize, strides, padding, data_format=None, name=None):  # noqa: A002
        if data_format not in _CHANNELS_FIRST:
            return pool(input, ksize, strides, padding, data_format=data_format, name=name)
        rank = len(data_format)
        to_last = [0] + list(range(2, rank)) + [1]
        to_first = [0, rank - 1] + list(range(1, rank - 1))
        out = pool(tf.transpose(input, to_last), ksize, strides, padding,
                   data_format=_CHANNELS_FIRST[data_format], name=name)
        return tf.transpose(out, to_first)
    pool_.channels_last = True
    return pool_


def _spread_filters(filters, rates):
    """``filters`` (spatial axes first, then in, out channels) with ``rate - 1`` zeros
    between the taps of each spatial axis: convolving with it undilated is convolving
    with ``filters`` dilated by ``rates`` (and differentiable in ``filters``)."""
    import tensorflow as tf
    for axis, rate in enumerate(rates):
        if rate == 1:
            continue
        taps = filters.shape[axis]
        moved = tf.experimental.numpy.moveaxis(filters, axis, 0)
        rest = moved.shape[1:]
        padded = tf.pad(tf.expand_dims(moved, 1), [[0, 0], [0, rate - 1]] + [[0, 0]] * len(rest))
        spread = tf.reshape(padded, [taps * rate] + list(rest))[:(taps - 1) * rate + 1]
        filters = tf.experimental.numpy.moveaxis(spread, 0, axis)
    return filters


def _undilated_conv(conv, spatial):
    """``conv`` (tf.nn.conv1d / conv3d, channels last) taking ``dilations`` > 1 on the CPU."""
    def conv_(input, filters, stride=None, padding=None, data_format=None,  # noqa: A002
              dilations=None, name=None, **kwargs):
        strides = kwargs.pop("strides", stride)
        rates = [1] * spatial if dilations is None else (
            [dilations] * spatial if isinstance(dilations, int) else list(dilations))
        if len(rates) == spatial + 2:
            rates = rates[1:-1] if data_format in (None, "NWC", "NDHWC") else rates[2:]
        if all(r == 1 for r in rates):
            return conv(input, filters, strides, padding, data_format=data_format,
                        dilations=dilations, name=name)
        return conv(input, _spread_filters(filters, rates), strides, padding,
                    data_format=data_format, name=name)
    conv_.undilated = True
    return conv_


def _float_learning_rate(optimizer):
    """A Keras optimizer class whose ``learning_rate`` may be an int (Keras 2's)."""
    def make(*args, **kwargs):
        if isinstance(kwargs.get("learning_rate"), int):
            kwargs["learning_rate"] = float(kwargs["learning_rate"])
        if args and isinstance(args[0], int):
            args = (float(args[0]),) + args[1:]
        return optimizer(*args, **kwargs)
    make.takes_int_rate = True
    return make


def _gen_cartesian_product(sets):
    """test_util.GenCartesianProduct, its ``"gpu" in set`` as numpy 1.x evaluated it (an
    array never equals a str there)."""
    import itertools
    for set_ in sets:
        if os.getenv("ONEFLOW_TEST_CPU_ONLY"):
            for i in reversed(range(len(set_))):
                if isinstance(set_[i], str) and set_[i] == "gpu":
                    del set_[i]
                    break
    return itertools.product(*sets)


def _patch_imported_oracles() -> None:
    tf = sys.modules.get("tensorflow")
    if tf is not None:
        for dim in (1, 2, 3):
            for kind in ("avg", "max"):
                name = f"{kind}_pool{dim}d"
                pool = getattr(tf.nn, name, None)
                if pool is not None and not getattr(pool, "channels_last", False):
                    setattr(tf.nn, name, _channels_last_pool(pool))
        for name, spatial in (("conv1d", 1), ("conv3d", 3)):
            conv = getattr(tf.nn, name, None)
            if conv is not None and not getattr(conv, "undilated", False):
                setattr(tf.nn, name, _undilated_conv(conv, spatial))
        for name in ("Adam", "RMSprop", "SGD"):
            optimizer = getattr(tf.keras.optimizers, name, None)
            if optimizer is not None and not getattr(optimizer, "takes_int_rate", False):
                setattr(tf.keras.optimizers, name, _float_learning_rate(optimizer))
    test_util = sys.modules.get("test_util")
    if test_util is not None and hasattr(test_util, "GenCartesianProduct"):
        test_util.GenCartesianProduct = _gen_cartesian_product


def pytest_runtest_setup(item):
    _patch_imported_oracles()


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
