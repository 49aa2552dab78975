"""Suite-wide settings.

Jobs compile for the CPU unless the run asks otherwise: on a machine with a GPU, jobs
outside any placement block would otherwise follow OneFlow's default and run there, and
most of the suite pins CPU behaviour (fused CPU kernels, thread splits, in-step range
errors). ``AIOFLOW_DEVICE=gpu python -m pytest tests/ops`` runs the op matrix on the GPU;
the GPU tests (``tests/backends``) choose their backend themselves.

This file also puts ``tests/`` on ``sys.path`` (pytest's rootdir-less conftest import), so
test modules import shared helpers such as ``tolerances`` by name.
"""
import inspect
import os

import pytest

os.environ.setdefault("AIOFLOW_DEVICE", "cpu")


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector, name, obj):
    """pytest-asyncio runs in strict mode beside anyio's pytest plugin (pyproject.toml):
    an ``async def`` test marked ``anyio`` runs on each backend of ``anyio_backend``
    (asyncio and trio); every other one gets the ``asyncio`` mark here, as auto mode would
    give it. Auto mode itself would claim the anyio tests too and run them on asyncio only.
    """
    function = getattr(obj, "__func__", obj)   # staticmethods in test classes
    if not (name.startswith("test") and inspect.iscoroutinefunction(function)):
        return None
    marks = _mark_names(obj) | _mark_names(collector.obj)
    if "anyio" not in marks and "asyncio" not in marks:
        pytest.mark.asyncio(obj)
    return None   # pytest collects it as usual, with the mark


def _mark_names(obj) -> set:
    marks = getattr(obj, "pytestmark", [])   # a list, or one mark at a module's top
    return {mark.name for mark in (marks if isinstance(marks, list) else [marks])}


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    """The event loops that ``@pytest.mark.anyio`` tests run on: both of anyio's backends
    (aioflow's awaited calls are native to each, runtime/trio_calls.py)."""
    return request.param


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
