"""Helpers for users' own test suites (pytest, pytest-asyncio).

Enable in a ``conftest.py``::

    pytest_plugins = ["aioflow.testing"]

then ask for the ``flow_session`` fixture: each test starts from an empty session (no
jobs, no variables) and, at teardown, waits for pending steps and callbacks and fails the
test if any of them raised::

    async def test_predict_shape(flow_session):
        @flow.global_function(type="predict")
        def predict(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
            return flow.layers.dense(x, 4)
        assert (await predict(np.zeros((2, 3), np.float32))).shape == (2, 4)

The fixture is synchronous, so it serves sync and ``async def`` tests alike.

:func:`simulated_gpu` runs the jobs placed on a GPU on a simulated one, so an app's
pipeline (steps overlapping on a device, completion awaited) can be tested on any machine.
"""
from __future__ import annotations

import contextlib

import pytest

from .engine import session as _session
from .backends import simulating_gpu
from .backends.simulated import SimulatedBackend, SimulatedDevice, SimulatedDeviceError

__all__ = ["flow_session", "simulated_gpu", "SimulatedDevice", "SimulatedDeviceError"]


@contextlib.contextmanager
def simulated_gpu(copy_ms: float = 0.0, compute_ms: float = 0.0, fetch_ms: float = 0.0,
                  *, poison: bool = False, cuda_graphs: bool = False):
    """Jobs compiled in this block that would run on a GPU (placed on ``"gpu"``, or by
    OneFlow's default placement) run on a simulated GPU instead, whatever the machine has.

    numpy does the arithmetic, off the caller's thread, on three simulated streams (copies
    in, compute, copies out), each running its work in order; a step's input copy, its
    compute and its output copy each take at least ``copy_ms``, ``compute_ms`` and
    ``fetch_ms`` milliseconds, so the runtime's overlap of steps shows as it would on a
    GPU (``flow.config.pipeline_depth``). Results equal the CPU's. ``poison=True`` fills
    staging buffers with NaN when they are released, so a buffer reused too early shows
    in the results. ``cuda_graphs=True`` captures and replays compiled steps as the CuPy
    backend's CUDA graphs do (a recording capturer: the bookkeeping of
    ``aioflow.backends.graph_capture`` without a GPU; ``flow.config.enable_cuda_graphs``
    switches it off). Yields the :class:`SimulatedDevice`: ``break_device()`` makes every
    later piece of work fail, as a sticky CUDA error does; ``repair()`` undoes it. Jobs
    compiled in the block keep the simulated GPU afterwards.

    >>> import numpy as np, aioflow as flow, aioflow.typing as tp
    >>> flow.clear_default_session()
    >>> with simulated_gpu(copy_ms=1, compute_ms=2, fetch_ms=1):
    ...     @flow.global_function(type="predict")
    ...     def double(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
    ...         with flow.scope.placement("gpu", "0:0"):
    ...             return x * 2
    ...     double(np.array([1.0, 2.0], np.float32))
    array([2., 4.], dtype=float32)
    >>> flow.clear_default_session()
    """
    backend = SimulatedBackend(copy_ms, compute_ms, fetch_ms, poison=poison,
                               graph_capture=cuda_graphs)
    with simulating_gpu(backend):
        yield backend.device


@pytest.fixture
def flow_session():
    """A fresh default session for one test, drained (errors raised) at teardown."""
    _session.clear_default_session()
    current = _session.default_session()
    yield current
    try:
        current.sync()
    finally:
        _session.clear_default_session()
