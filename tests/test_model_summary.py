"""flow.summary(job): ops, output shapes, parameters, FLOPs per step, peak memory."""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp


@pytest.fixture(autouse=True)
def fresh():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def lenet_train_job():
    @flow.global_function(type="train")
    def train(images: tp.Numpy.Placeholder((20, 1, 28, 28), dtype=flow.float),
              labels: tp.Numpy.Placeholder((20,), dtype=flow.int32)) -> tp.Numpy:
        conv = flow.layers.conv2d(images, 8, 5, padding="SAME", activation=flow.nn.relu,
                                  name="conv1")
        pool = flow.nn.max_pool2d(conv, ksize=2, strides=2, padding="SAME")
        flat = flow.reshape(pool, [pool.shape[0], -1])
        logits = flow.layers.dense(flat, 10, name="dense")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]),
                           momentum=0).minimize(loss)
        return loss

    return train


def test_lenet_like_train_job(capsys):
    s = flow.summary(lenet_train_job())
    printed = capsys.readouterr().out
    assert printed.startswith("job train (train), ")
    assert "parameters: 15,898 " in printed  # 8*25 + 8 + 1568*10 + 10
    assert s.params == 8 * 25 + 8 + 8 * 14 * 14 * 10 + 10
    conv = next(r for r in s.rows if r.name == "conv1-conv")
    assert conv.params == 8 * 25
    assert conv.flops == 2 * 20 * 8 * 28 * 28 * 25  # the convolution before its pooling
    ops = {r.op for r in s.rows}
    # the step's backward and update ops are part of it and of its FLOPs
    assert {"conv2d_backward_filter", "sgd_update"} <= ops
    assert s.flops > 2 * conv.flops  # forward + the filter gradient (no data gradient: input)
    # peak: at least the input batch and the conv output, at most everything at once
    assert 20 * 784 * 4 + 20 * 8 * 28 * 28 * 4 < s.peak_bytes
    assert s.buffer_bytes <= s.peak_bytes


def test_summary_does_not_run_a_step():
    job = lenet_train_job()
    flow.summary(job, print_=False)
    assert job(np.zeros((20, 1, 28, 28), np.float32), np.zeros(20, np.int32)).shape == (20,)


def test_summary_refuses_a_plain_function():
    with pytest.raises(TypeError, match="flow.summary: expected a job function .* got function"):
        flow.summary(lambda x: x)


def test_the_job_method_gives_the_same_summary():
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def predict(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.layers.dense(x, 4, name="fc")
    by_method = predict.summary(print_=False)
    assert by_method.params == flow.summary(predict, print_=False).params == 3 * 4 + 4
