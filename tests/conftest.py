"""Suite-wide settings.

Jobs compile for the CPU unless the run asks otherwise: on a machine with a GPU, jobs
outside any placement block would otherwise follow OneFlow's default and run there, and
most of the suite pins CPU behaviour (fused CPU kernels, thread splits, in-step range
errors). ``AIOFLOW_DEVICE=gpu python -m pytest tests/ops`` runs the op matrix on the GPU;
the GPU tests (``tests/backends``) choose their backend themselves.

This file also puts ``tests/`` on ``sys.path`` (pytest's rootdir-less conftest import), so
test modules import shared helpers such as ``tolerances`` by name.
"""
import os

os.environ.setdefault("AIOFLOW_DEVICE", "cpu")


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` need CuPy on a CUDA device: where there is none (CI never has
    one) each skips with the reason shown."""
    import pytest

    from aioflow import backends
    why = None
    for item in items:
        if item.get_closest_marker("gpu") is None:
            continue
        why = why or backends.gpu_unusable_reason()
        if why is not None:
            item.add_marker(pytest.mark.skip(reason=f"needs a CUDA GPU with CuPy: {why}"))
