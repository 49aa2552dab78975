"""Every test of the data readers starts and ends with an empty default session: a session
keeps its jobs' loader threads until it is cleared, and none may outlive its test
(test_loader.py counts them)."""
import pytest

import aioflow as flow


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()
