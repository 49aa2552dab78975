"""Backend tests: tests marked ``gpu`` need CuPy on a CUDA device and skip, with the
reason shown, where there is none (CI never has one)."""
import pytest

from aioflow import backends


def pytest_collection_modifyitems(config, items):
    why = None
    for item in items:
        if item.get_closest_marker("gpu") is None:
            continue
        why = why or backends.gpu_unusable_reason()
        if why is not None:
            item.add_marker(pytest.mark.skip(reason=f"needs a CUDA GPU with CuPy: {why}"))
