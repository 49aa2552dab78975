"""The v0.3-era model zoo (issue 24): each model written as OneFlow's model zoo writes it
(job functions, ``function_config``, ``scope.namespace``, initializers, regularizers,
schedulers with warm-up), trained a few steps on a fixed synthetic batch.

The zoo's scripts set OneFlow settings that change nothing here (cuDNN, fusion of
add-to-output...): each warns once that it has no effect, which these tests expect."""
import pytest

import aioflow as flow

NO_EFFECT = pytest.mark.filterwarnings("ignore:.*has no effect in aioflow:RuntimeWarning")


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/models/" in item.nodeid:
            item.add_marker(NO_EFFECT)


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    flow.random.seed(0)   # the same initial weights and dropout masks every run
    yield
    flow.random.seed(None)
    flow.clear_default_session()
