"""Fixtures of the serving tests: a small trained checkpoint, shared by the whole session.

The checkpoint is a small MLP, trained for a few steps on the bundled digits and saved
the way quickstart.py saves it.
"""
import pytest

import aioflow as flow
import aioflow.typing as tp
from serving_helpers import load_server_module


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory):
    """A quickstart-style MLP checkpoint (15 SGD steps on the bundled digits)."""
    (train_x, train_y), _ = flow.data.load_digits(100, 100)
    mlp = load_server_module()._quickstart().mlp
    flow.clear_default_session()

    @flow.global_function(type="train")
    def train_job(images: tp.Numpy.Placeholder((100, 1, 28, 28), dtype=flow.float),
                  labels: tp.Numpy.Placeholder((100,), dtype=flow.int32)) -> tp.Numpy:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, mlp(images, True))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]),
                           momentum=0).minimize(loss)
        return loss

    flow.train.CheckPoint().init()
    for i in range(15):
        train_job(train_x[i % len(train_x)], train_y[i % len(train_y)])
    path = tmp_path_factory.mktemp("serving") / "mlp_model"
    flow.checkpoint.save(str(path))
    flow.clear_default_session()
    return str(path)
