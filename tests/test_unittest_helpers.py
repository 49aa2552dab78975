"""flow.unittest: OneFlow's test-case helpers run a OneFlow user's unittest suite."""
import io
import textwrap
import unittest

import pytest

import aioflow as flow


def _run(*cases) -> unittest.TestResult:
    suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromTestCase(case)
                               for case in cases)
    return unittest.TextTestRunner(stream=io.StringIO()).run(suite)


def test_every_test_starts_from_an_empty_session():
    seen = []

    class TestSessions(flow.unittest.TestCase):
        def test_a(test_case):
            flow.get_all_variables()
            seen.append(len(flow.session.default_session().variables))
            flow.session.default_session().variables["leftover"] = None

        def test_b(test_case):
            seen.append(len(flow.session.default_session().variables))
    assert _run(TestSessions).wasSuccessful()
    assert seen == [0, 0]


def test_skip_unless_follows_the_test_environment(monkeypatch):
    monkeypatch.delenv("ONEFLOW_TEST_NODE_LIST", raising=False)
    monkeypatch.delenv("ONEFLOW_TEST_DEVICE_NUM", raising=False)

    def case():
        @flow.unittest.skip_unless_1n1d()
        class One(flow.unittest.TestCase):
            def test_it(test_case):
                pass

        @flow.unittest.skip_unless_1n2d()
        class Two(flow.unittest.TestCase):
            def test_it(test_case):
                pass
        return One, Two
    result = _run(*case())
    assert result.testsRun == 2 and len(result.skipped) == 1
    assert "only runs on 1 node(s) with 2 device(s) each" in result.skipped[0][1]
    monkeypatch.setenv("ONEFLOW_TEST_DEVICE_NUM", "2")
    result = _run(*case())
    assert len(result.skipped) == 1 and "with 1 device(s)" in result.skipped[0][1]


def test_env_reads_oneflows_variables(monkeypatch):
    env = flow.unittest.env
    monkeypatch.delenv("ONEFLOW_TEST_NODE_LIST", raising=False)
    assert (env.has_node_list(), env.node_size(), env.device_num()) == (False, 1, 1)
    with pytest.raises(ValueError, match="ONEFLOW_TEST_NODE_LIST is not set"):
        env.node_list()
    monkeypatch.setenv("ONEFLOW_TEST_NODE_LIST", "a,b")
    monkeypatch.setenv("ONEFLOW_TEST_DEVICE_NUM", "4")
    monkeypatch.setenv("ONEFLOW_TEST_ENABLE_EAGER", "1")
    assert env.node_list() == ["a", "b"] and env.node_size() == 2 and env.device_num() == 4
    assert env.eager_execution_enabled() and not env.typing_check_enabled()
    monkeypatch.setenv("ONEFLOW_TEST_DEVICE_NUM", "four")
    with pytest.raises(ValueError, match="ONEFLOW_TEST_DEVICE_NUM must be an int"):
        env.device_num()


def test_register_test_cases_builds_classes_from_a_directory(tmp_path):
    (tmp_path / "test_ops.py").write_text(textwrap.dedent("""
        import numpy as np
        import aioflow as flow
        import aioflow.typing as tp

        def test_double(test_case):
            @flow.global_function(type="predict")
            def double(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
                return x * 2
            test_case.assertTrue(np.array_equal(double(np.ones(2, np.float32)), [2, 2]))

        @flow.unittest.num_nodes_required(2)
        def test_two_nodes(test_case):
            raise AssertionError("filtered out: needs two nodes")

        def helper():
            pass
    """))
    (tmp_path / "notes.py").write_text("raise RuntimeError('not a test file')\n")
    scope = {}
    flow.unittest.register_test_cases(scope, str(tmp_path), lambda nodes: nodes == 1)
    assert list(scope) == ["test_ops"]
    case = scope["test_ops"]
    assert sorted(n for n in dir(case) if n.startswith("test")) == ["test_double"]
    assert _run(case).wasSuccessful()
    with pytest.raises(ValueError, match="is not a directory"):
        flow.unittest.register_test_cases({}, str(tmp_path / "missing"), bool)
    with pytest.raises(ValueError, match="num_nodes_required"):
        flow.unittest.num_nodes_required(0)
