"""flow.watch / flow.watch_diff: a blob's value, or the loss's gradient for it, handed to a
handler at every step, in order, where the step's result is delivered."""
import threading

import anyio
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp

from concurrently import gather

X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
Y = np.array([0, 1, 2, 3], np.int32)
W = np.linspace(-0.5, 0.5, 15, dtype=np.float32).reshape(5, 3)   # dense stores (out, in)


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _train(seen, form=tp.Numpy, extra=None):
    def train(x: tp.Numpy.Placeholder((4, 3)), y: tp.Numpy.Placeholder((4,), dtype=flow.int32)):
        logits = flow.layers.dense(x, 5, name="fc", use_bias=False,
                                   kernel_initializer=flow.constant_initializer(0.0))
        flow.watch(logits, lambda v: seen.append(("logits", v)))
        flow.watch_diff(logits, lambda g: seen.append(("d logits", g)))
        if extra is not None:
            extra(x, logits)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.SGD(0.1, momentum=0).minimize(loss)
        return loss
    train.__annotations__["return"] = form
    job = flow.global_function(type="train")(train)
    flow.train.CheckPoint().init()
    flow.load_variables({"fc-weight": W})
    return job


def _oracle(w):
    """logits = x @ w.T, the watched diff d sum(CE)/d logits = softmax - onehot (OneFlow
    seeds the loss's diff with ones), and the update with the model diff scaled by 1/batch
    (the loss's instance count), in float64."""
    logits = X.astype(np.float64) @ w.T.astype(np.float64)
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    grad = p - np.eye(5)[Y]
    return logits, grad, w - 0.1 * (grad.T @ X) / len(Y)


def test_values_and_gradients_match_a_numpy_oracle_step_after_step():
    seen = []
    train = _train(seen)
    w = W.astype(np.float64)
    for _ in range(3):
        train(X, Y)
        logits, grad, w = _oracle(w)
        (name1, value), (name2, diff) = seen[-2:]
        assert (name1, name2) == ("logits", "d logits")
        np.testing.assert_allclose(value, logits, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(diff, grad, rtol=1e-5, atol=1e-6)
    assert len(seen) == 6


def test_the_gradient_agrees_with_central_differences():
    seen = []
    train = _train(seen)
    train(X, Y)
    diff = seen[1][1].astype(np.float64)

    def summed_loss(logits):   # the per-sample losses, each seeded with a diff of one
        p = np.exp(logits - logits.max(1, keepdims=True))
        return float(np.sum(-np.log(p[np.arange(4), Y] / p.sum(1))))
    logits = seen[0][1].astype(np.float64)
    eps = 1e-6
    numeric = np.zeros_like(logits)
    for index in np.ndindex(*logits.shape):
        up, down = logits.copy(), logits.copy()
        up[index] += eps
        down[index] -= eps
        numeric[index] = (summed_loss(up) - summed_loss(down)) / (2 * eps)
    np.testing.assert_allclose(diff, numeric, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("inline_callback_ms", [0, 10])
def test_callback_form_handlers_run_before_the_callback_in_its_thread(inline_callback_ms):
    # 0: every step queued, its callback on the delivery thread; 10 (the default): this
    # tiny job's steps run in the calling thread, and so do their short callbacks
    before = flow.config.get("inline_callback_ms")
    flow.config.inline_callback_ms(inline_callback_ms)
    try:
        seen, where = [], []

        def note(_):
            where.append(threading.current_thread().name)
        train = _train(seen, form=tp.Callback[tp.Numpy],
                       extra=lambda x, logits: flow.watch(x, note))
        train(X, Y)(lambda loss: (seen.append(("callback", loss)), note(loss)))
        flow.sync_default_session()
    finally:
        flow.config.inline_callback_ms(before)
    assert [name for name, _ in seen] == ["logits", "d logits", "callback"]
    # Only the numpy backend runs short steps in the caller's thread (a device's steps,
    # e.g. under AIOFLOW_DEVICE=strict or gpu, always go through its compute thread).
    backend = train.compiled_for(flow.session.default_session()).backend.name
    inline = inline_callback_ms > 0 and backend == "numpy"
    expected = threading.current_thread().name if inline else "aioflow-delivery"
    assert where == [expected, expected]


@pytest.mark.anyio
async def test_awaited_steps_deliver_on_the_loop_in_order():
    seen = []
    train = await anyio.to_thread.run_sync(_train, seen)
    await gather([train(X, Y), train(X, Y)])    # both in flight at once
    assert [name for name, _ in seen] == ["logits", "d logits"] * 2
    assert not np.allclose(seen[0][1], seen[2][1])   # the second step saw updated weights


def test_a_string_prompt_prints_and_a_blob_off_the_loss_path_has_zero_gradient(capsys):
    seen = []

    def extra(x, logits):
        unused = x * 3.0
        flow.watch(unused, "x times three:")
        flow.watch_diff(unused, lambda g: seen.append(("d unused", g)))
    train = _train(seen, extra=extra)
    train(X, Y)
    assert capsys.readouterr().out.startswith("x times three: [[")
    np.testing.assert_array_equal(seen[-1][1], np.zeros((4, 3), np.float32))


def test_misuse_is_refused_with_clear_errors():
    with pytest.raises(RuntimeError, match="inside a job function"):
        flow.watch(np.zeros(3))

    @flow.global_function(type="predict")
    def predict(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        flow.watch_diff(x, print)
        return x
    with pytest.raises(TypeError, match="gradients exist only in a train job"):
        predict(X)

    @flow.global_function(type="predict")
    def bad_handler(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        flow.watch(x, 42)
        return x
    with pytest.raises(TypeError, match="handler_or_prompt must be a callable"):
        bad_handler(X)


def test_a_watched_variable_gets_the_ones_seeded_diff_while_its_update_uses_the_mean():
    # OneFlow scales only the model diffs that feed the update by 1/(loss instance
    # count); the diff a watcher sees is the ones-seeded one.
    seen = []

    @flow.global_function(type="train")
    def fit(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3,), initializer=flow.ones_initializer())
        flow.watch_diff(w, seen.append)
        loss = w * x   # per-element loss: 12 instances
        flow.optimizer.SGD(0.5, momentum=0).minimize(loss)
        return loss

    fit(X)
    # atol: a column of X sums to about 0, which float32 sums in any order round apart
    np.testing.assert_allclose(seen[0], X.sum(0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(flow.get_all_variables()["w"],
                               1 - 0.5 * X.sum(0) / X.size, rtol=1e-6)


def test_handlers_receive_the_form_their_annotation_names_as_in_oneflow():
    got = {}

    def plain(blob):
        got["plain"] = blob

    def as_numpy(value: tp.Numpy):
        got["numpy"] = value

    def as_list(value: tp.ListNumpy):
        got["list"] = value

    def as_list_list(value: tp.ListListNumpy):
        got["list_list"] = value

    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        y = x + 1
        for handler in (plain, as_numpy, as_list, as_list_list):
            flow.watch(y, handler)
        return y

    job(X)
    np.testing.assert_array_equal(got["plain"].numpy(), X + 1)        # a blob-like value
    np.testing.assert_array_equal(got["plain"].numpy_list()[0], X + 1)
    assert type(got["numpy"]) is np.ndarray
    assert isinstance(got["list"], list) and len(got["list"]) == 1
    np.testing.assert_array_equal(got["list"][0], X + 1)
    np.testing.assert_array_equal(got["list_list"][0][0], X + 1)


def test_an_integer_blob_can_be_watched_and_its_diff_is_zeros():
    values, diffs = [], []

    @flow.global_function(type="train")
    def fit(x: tp.Numpy.Placeholder((4, 3)),
            y: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3, 5), initializer=flow.ones_initializer())
        flow.watch(y, values.append)
        flow.watch_diff(y, diffs.append)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, flow.matmul(x, w))
        flow.optimizer.SGD(0.1, momentum=0).minimize(loss)
        return loss

    fit(X, Y)
    np.testing.assert_array_equal(values[0].numpy(), Y)
    assert diffs[0].dtype == np.int32
    np.testing.assert_array_equal(diffs[0].numpy(), np.zeros(4, np.int32))


def test_a_handler_with_an_annotation_oneflow_refuses_is_refused():
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        flow.watch(x, lambda value: None)

        def wrong(value: int):
            pass
        flow.watch(x, wrong)
        return x
    with pytest.raises(TypeError, match="annotation must be tp.Numpy"):
        job(X)


def test_a_watched_logits_gradient_survives_the_fused_cross_entropy():
    # On backends bound by launches the compiler merges the cross entropy with its
    # gradient (compiler/launch_fusion.py); the watched gradient of the logits must then
    # be the fused op's output, not the replaced op's, which nothing computes any more.
    flow.config.launch_fusion(True)
    try:
        seen = []
        train = _train(seen)
        train(X, Y)
    finally:
        flow.config.launch_fusion("auto")
    assert [name for name, _ in seen] == ["logits", "d logits"]
    np.testing.assert_allclose(seen[1][1], _oracle(W)[1], rtol=1e-5, atol=1e-6)


def test_an_unannotated_handler_sees_the_blobs_is_dynamic():
    # OneFlow's watched blob object answers is_dynamic (its op tests branch on it)
    seen = {}
    config = flow.FunctionConfig()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(function_config=config)
    def job(x: tp.ListNumpy.Placeholder((4,)), y: tp.Numpy.Placeholder((2,))):
        flow.watch(x, lambda v: seen.setdefault("x", v))
        flow.watch(y, lambda v: seen.setdefault("y", v))
        return y

    job([np.arange(3, dtype=np.float32)], np.zeros(2, np.float32)).get()
    assert seen["x"].is_dynamic is True and seen["x"].numpy_list()[0].tolist() == [0, 1, 2]
    assert seen["y"].is_dynamic is False
