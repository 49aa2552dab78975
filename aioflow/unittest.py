"""``flow.unittest``: OneFlow's helpers for test suites written with ``unittest``, so a
OneFlow user's tests run with the import changed.

* :class:`TestCase`: a ``unittest.TestCase`` whose every test starts from an empty default
  session (no jobs, no variables), as OneFlow's does.
* ``skip_unless_1n1d()``, ``skip_unless_1n2d()``, ...: decorators that keep a test (or a
  test class) only on ``N`` nodes with ``D`` devices each, as the test environment says
  (``env.node_size()``, ``env.device_num()``); otherwise it is skipped with the reason.
* ``env``: the test environment from OneFlow's variables: ``ONEFLOW_TEST_NODE_LIST``
  (comma-separated hosts), ``ONEFLOW_TEST_DEVICE_NUM`` (default 1),
  ``ONEFLOW_TEST_ENABLE_EAGER`` and ``ONEFLOW_TEST_ENABLE_TYPING_CHECK`` ("1": on).
* :func:`register_test_cases` / :func:`num_nodes_required`: OneFlow's way of turning the
  ``test*`` functions of a directory's ``test*.py`` files into test classes.

>>> import io, unittest
>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.unittest.skip_unless_1n1d()
... class TestDouble(flow.unittest.TestCase):
...     def test_double(test_case):
...         @flow.global_function(type="predict")
...         def double(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
...             return x * 2
...         test_case.assertTrue(np.array_equal(double(np.ones(2, np.float32)), [2, 2]))
>>> result = unittest.TextTestRunner(stream=io.StringIO()).run(
...     unittest.defaultTestLoader.loadTestsFromTestCase(TestDouble))
>>> result.testsRun, result.wasSuccessful()
(1, True)
"""
from __future__ import annotations

import importlib.util
import os
import types
import unittest as _unittest
from typing import Any, Callable
from .engine.session import clear_default_session

__all__ = ["TestCase", "env", "num_nodes_required", "register_test_cases",
           "skip_unless_1n1d", "skip_unless_1n2d", "skip_unless_1n4d",
           "skip_unless_2n1d", "skip_unless_2n2d", "skip_unless_2n4d"]


def _flag(name: str) -> bool:
    return os.getenv(name) == "1"


def _node_list() -> list[str]:
    """The hosts of ``ONEFLOW_TEST_NODE_LIST``; ValueError when it is not set."""
    value = os.getenv("ONEFLOW_TEST_NODE_LIST")
    if not value:
        raise ValueError("flow.unittest.env.node_list: ONEFLOW_TEST_NODE_LIST is not set")
    return value.split(",")


def _has_node_list() -> bool:
    return bool(os.getenv("ONEFLOW_TEST_NODE_LIST"))


def _node_size() -> int:
    return len(_node_list()) if _has_node_list() else 1


def _device_num() -> int:
    value = os.getenv("ONEFLOW_TEST_DEVICE_NUM", "1")
    try:
        return int(value)
    except ValueError:
        raise ValueError("flow.unittest.env.device_num: ONEFLOW_TEST_DEVICE_NUM must be an "
                         f"int, got {value!r}") from None


env = types.SimpleNamespace(
    node_list=_node_list, has_node_list=_has_node_list, node_size=_node_size,
    device_num=_device_num,
    eager_execution_enabled=lambda: _flag("ONEFLOW_TEST_ENABLE_EAGER"),
    typing_check_enabled=lambda: _flag("ONEFLOW_TEST_ENABLE_TYPING_CHECK"),
)


class _ClearDefaultSession:
    """Each test starts from an empty default session (OneFlow's test-case mixin)."""

    def setUp(self):
        clear_default_session()


class TestCase(_ClearDefaultSession, _unittest.TestCase):
    """``unittest.TestCase`` whose every test starts from an empty default session."""


def _skip_unless(nodes: int, devices: int) -> Callable:
    def decorator_factory():
        if _node_size() == nodes and _device_num() == devices:
            return lambda test: test
        return _unittest.skip(f"only runs on {nodes} node(s) with {devices} device(s) each "
                              f"(here: {_node_size()} with {_device_num()})")
    decorator_factory.__name__ = f"skip_unless_{nodes}n{devices}d"
    decorator_factory.__doc__ = (f"A decorator keeping a test only on {nodes} node(s) with "
                                 f"{devices} device(s) each; elsewhere it is skipped.")
    return decorator_factory


skip_unless_1n1d = _skip_unless(1, 1)
skip_unless_1n2d = _skip_unless(1, 2)
skip_unless_1n4d = _skip_unless(1, 4)
skip_unless_2n1d = _skip_unless(2, 1)
skip_unless_2n2d = _skip_unless(2, 2)
skip_unless_2n4d = _skip_unless(2, 4)


def num_nodes_required(num_nodes: int) -> Callable[[Callable], Callable]:
    """Mark a test function as needing ``num_nodes`` nodes (read by
    :func:`register_test_cases`' filter)."""
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 1:
        raise ValueError(f"flow.unittest.num_nodes_required: expected a positive int, got "
                         f"{num_nodes!r}")

    def decorator(test: Callable) -> Callable:
        test.__oneflow_test_case_num_nodes_required__ = num_nodes
        return test
    return decorator


def register_test_cases(scope: dict[str, Any], directory: str,
                        filter_by_num_nodes: Callable[[int], bool],
                        base_class: type = _unittest.TestCase,
                        test_case_mixin: type = _ClearDefaultSession) -> None:
    """For each ``test*.py`` file of ``directory``, put into ``scope`` a test class named
    after the file whose test methods are the file's ``test*`` functions for which
    ``filter_by_num_nodes(nodes they require)`` holds (1 unless marked)."""
    if not os.path.isdir(directory):
        raise ValueError(f"flow.unittest.register_test_cases: directory {directory!r} is not "
                         "a directory")
    for file_name in sorted(os.listdir(directory)):
        path = os.path.join(directory, file_name)
        if not (file_name.startswith("test") and file_name.endswith(".py")
                and os.path.isfile(path)):
            continue
        class_name = file_name[:-3]
        spec = importlib.util.spec_from_file_location(class_name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        methods = {}
        for name in dir(module):
            test = getattr(module, name)
            if (name.startswith("test") and callable(test) and not isinstance(test, type)
                    and filter_by_num_nodes(
                        getattr(test, "__oneflow_test_case_num_nodes_required__", 1))):
                methods[name] = test
        scope[class_name] = type(class_name, (test_case_mixin, base_class), methods)
