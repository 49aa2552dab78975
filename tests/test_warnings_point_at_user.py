"""Warnings name the user's line, not a line inside aioflow."""
import asyncio
import warnings

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow import backends


def caught(fn):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn()
    assert seen, "no warning"
    return seen[0]


def test_deprecated_scheduler_alias():
    w = caught(lambda: flow.optimizer.PolynomialSchduler(0.1, 10))
    assert w.filename == __file__


def test_blocking_inside_a_loop():
    async def main():
        return caught(lambda: flow.blocking(flow.sync_default_session))
    assert asyncio.run(main()).filename == __file__


@pytest.mark.skipif(backends.gpu_usable(), reason="the warning is for machines without a GPU")
def test_gpu_placement_without_gpu(monkeypatch):
    monkeypatch.delenv("AIOFLOW_DEVICE", raising=False)
    flow.clear_default_session()
    from aioflow.engine import session
    monkeypatch.setattr(session.warn_once, "__defaults__", (set(),))  # warn again

    @flow.global_function(type="predict")
    def on_gpu(x: tp.Numpy.Placeholder((2,), dtype=flow.float)) -> tp.Numpy:
        with flow.scope.placement("gpu", "0:0"):
            return x + 1

    w = caught(lambda: on_gpu(np.zeros(2, np.float32)))
    assert w.filename == __file__ and "CPU" in str(w.message)
    flow.clear_default_session()


def test_checkpoint_warnings(tmp_path):
    from aioflow.checkpoint.io import read_arrays, save_arrays
    root = tmp_path / "ckpt"
    save_arrays(str(root), {"w": np.ones(2, np.float32)})
    (root / "snapshot_done").unlink()       # an unfinished save: loads with a warning
    w = caught(lambda: read_arrays(str(root)))
    assert w.filename == __file__ and "snapshot_done" in str(w.message)
