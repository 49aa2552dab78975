"""flow.data.ofrecord_reader and its decoders inside jobs: batches of the data set, step
after step, through the loader, for training and inference."""
import asyncio
import threading
from typing import Tuple

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow.data import ofrecord


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _numbers(tmp_path, n=10, parts=3):
    records = [{"index": np.int64(i), "x": np.array([i, -i], np.float32)} for i in range(n)]
    ofrecord.write_ofrecord(tmp_path, records, data_part_num=parts)
    return str(tmp_path)


def _index_job(data_dir, batch_size, parts=3, **reader):
    @flow.global_function(type="predict")
    def read() -> Tuple[tp.Numpy, tp.Numpy]:
        records = flow.data.ofrecord_reader(data_dir, batch_size=batch_size,
                                            data_part_num=parts, **reader)
        index = flow.data.OFRecordRawDecoder(records, "index", shape=(), dtype=flow.int32)
        x = flow.data.OFRecordRawDecoder(records, "x", shape=(2,), dtype=flow.float)
        return index, x
    return read


def test_batches_follow_the_files_and_start_over(tmp_path):
    read = _index_job(_numbers(tmp_path), batch_size=4)
    seen = [read() for _ in range(3)]
    assert [s[0].tolist() for s in seen] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]
    np.testing.assert_array_equal(seen[0][1], [[0, 0], [1, -1], [2, -2], [3, -3]])
    assert seen[0][0].dtype == np.int32 and seen[0][1].dtype == np.float32


def test_random_shuffle_draws_from_a_seeded_buffer(tmp_path):
    data_dir = _numbers(tmp_path, n=12, parts=2)
    orders = []
    for _ in range(2):
        flow.clear_default_session()
        read = _index_job(data_dir, 12, parts=2, random_shuffle=True, shuffle_buffer_size=4,
                          seed=3)
        orders.append(np.concatenate([read()[0] for _ in range(4)]))
    np.testing.assert_array_equal(orders[0], orders[1])   # the seed fixes the order
    drawn = orders[0]
    assert drawn[:12].tolist() != list(range(12))
    # 52 records entered the 4-record buffer for 48 draws: each index came out 3 to 5 times
    assert set(np.bincount(drawn, minlength=12).tolist()) <= {3, 4, 5}
    # record i enters the buffer after i - 4 draws, so it cannot come out earlier
    first_seen = [int(np.argmax(drawn == i)) for i in range(12)]
    assert all(first_seen[i] >= i - 4 for i in range(12))


def test_shuffle_after_epoch_reorders_the_part_files(tmp_path):
    data_dir = _numbers(tmp_path, n=12, parts=6)
    read = _index_job(data_dir, 12, parts=6, shuffle_after_epoch=True, seed=0)
    epochs = [read()[0].tolist() for _ in range(4)]
    assert epochs[0] == list(range(12))
    assert all(sorted(e) == list(range(12)) for e in epochs)
    assert any(e != list(range(12)) for e in epochs[1:])
    for epoch in epochs:   # whole files move: pairs (2k, 2k+1) stay together
        assert all(epoch[i] // 2 == epoch[i + 1] // 2 for i in range(0, 12, 2))


def test_images_decode_with_pillow_in_each_color_space(tmp_path):
    rng = np.random.default_rng(0)
    pictures = rng.integers(0, 256, size=(4, 5, 6, 3), dtype=np.uint8)
    ofrecord.write_ofrecord(tmp_path, [
        {"encoded": ofrecord.encode_image(p), "class/label": np.int32(i)}
        for i, p in enumerate(pictures)], part_name_suffix_length=5)

    @flow.global_function(type="predict")
    def decode_job() -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        records = flow.data.ofrecord_reader(str(tmp_path), batch_size=4,
                                            part_name_suffix_length=5)
        rgb = flow.data.OFRecordImageDecoder(records, "encoded", color_space="RGB")
        bgr = flow.data.OFRecordImageDecoder(records, "encoded")
        gray = flow.data.ofrecord_image_decoder(records, "encoded", color_space="GRAY")
        return rgb, bgr, gray

    rgb, bgr, gray = decode_job()
    np.testing.assert_array_equal(rgb, pictures)
    np.testing.assert_array_equal(bgr, pictures[..., ::-1])
    assert gray.shape == (4, 5, 6, 1)
    luma = (pictures @ np.array([299, 587, 114]) / 1000)[..., None]   # ITU-R 601-2
    assert np.abs(gray - luma).max() <= 1.0

    @flow.global_function(type="predict")
    def classify_job() -> Tuple[tp.Numpy, tp.Numpy]:
        return flow.data.ofrecord_image_classification_reader(
            str(tmp_path), "encoded", "class/label", batch_size=2,
            part_name_suffix_length=5, color_space="RGB")

    image, label = classify_job()
    np.testing.assert_array_equal(image, pictures[:2])
    assert label.tolist() == [0, 1] and label.dtype == np.int32


def _regression_set(tmp_path, n=64):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.3).astype(np.float32)
    ofrecord.write_ofrecord(tmp_path, [{"x": x[i], "y": y[i]} for i in range(n)],
                            data_part_num=4)
    return x, y


def _linear(x):
    return flow.layers.dense(x, 1, name="fc", kernel_initializer=flow.zeros_initializer(),
                             bias_initializer=flow.zeros_initializer())


def _sgd(loss):
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]),
                       momentum=0).minimize(loss)


def test_training_from_records_equals_training_from_the_same_arrays(tmp_path):
    x, y = _regression_set(tmp_path)

    @flow.global_function(type="train")
    def from_records() -> tp.Numpy:
        records = flow.data.ofrecord_reader(str(tmp_path), batch_size=16, data_part_num=4)
        xb = flow.data.OFRecordRawDecoder(records, "x", shape=(3,), dtype=flow.float)
        yb = flow.data.OFRecordRawDecoder(records, "y", shape=(1,), dtype=flow.float)
        loss = flow.math.reduce_mean(flow.math.square(_linear(xb) - yb))
        _sgd(loss)
        return loss

    losses = [from_records().item() for _ in range(12)]
    trained = flow.get_all_variables()["fc-weight"].copy()
    assert losses[-1] < 0.1 * losses[0]

    flow.clear_default_session()

    @flow.global_function(type="train")
    def from_arrays(xb: tp.Numpy.Placeholder((16, 3)), yb: tp.Numpy.Placeholder((16, 1))
                    ) -> tp.Numpy:
        loss = flow.math.reduce_mean(flow.math.square(_linear(xb) - yb))
        _sgd(loss)
        return loss

    reference = [from_arrays(x[i % 4 * 16:][:16], y[i % 4 * 16:][:16]).item()
                 for i in range(12)]
    np.testing.assert_allclose(losses, reference, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(trained, flow.get_all_variables()["fc-weight"],
                               rtol=1e-5, atol=1e-7)


async def test_awaited_and_callback_calls_take_successive_batches(tmp_path):
    read = _index_job(_numbers(tmp_path), batch_size=5)
    first = await read()
    second = await read()
    assert first[0].tolist() == [0, 1, 2, 3, 4] and second[0].tolist() == [5, 6, 7, 8, 9]

    got = []

    @flow.global_function(type="predict")
    def with_callback() -> tp.Callback[tp.Numpy]:
        records = flow.data.ofrecord_reader(str(tmp_path), batch_size=5, data_part_num=3)
        return flow.data.OFRecordRawDecoder(records, "index", shape=(), dtype=flow.int32)

    done = asyncio.Event()
    with_callback()(lambda v: got.append(v.tolist()))
    with_callback()(lambda v: (got.append(v.tolist()), done.set()))
    await asyncio.wait_for(done.wait(), 30)
    assert got == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]


def test_bytes_decoder_and_zero_padding(tmp_path):
    ofrecord.write_ofrecord(tmp_path, [
        {"key": bytes([i, 200, 7]), "ids": np.arange(i + 1, dtype=np.int32)} for i in range(3)])

    @flow.global_function(type="predict")
    def job() -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        records = flow.data.ofrecord_reader(str(tmp_path), batch_size=3)
        key = flow.data.OFRecordBytesDecoder(records, "key")
        ids = flow.data.OFRecordRawDecoder(records, "ids", shape=(4,), dtype=flow.int64,
                                           auto_zero_padding=True)
        raw = flow.data.OFRecordRawDecoder(records, "key", shape=(4,), dtype=flow.uint8)
        return key, ids, raw

    key, ids, raw = job()
    assert key.dtype == np.uint8 and key.tolist() == [[0, 200, 7], [1, 200, 7], [2, 200, 7]]
    assert ids.tolist() == [[0, 0, 0, 0], [0, 1, 0, 0], [0, 1, 2, 0]]
    assert raw.tolist() == [[0, 200, 7, 0], [1, 200, 7, 0], [2, 200, 7, 0]]


def test_decode_ofrecord_with_codecs(tmp_path):
    pictures = np.random.default_rng(2).integers(0, 256, size=(2, 4, 4, 3), dtype=np.uint8)
    ofrecord.write_ofrecord(tmp_path, [{"img": ofrecord.encode_image(p), "y": np.int32(i)}
                                       for i, p in enumerate(pictures)])
    mean, std = [10.0, 20.0, 30.0], [2.0, 4.0, 8.0]

    @flow.global_function(type="predict")
    def job() -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        conf = flow.data.BlobConf(
            "img", (3, 4, 4), flow.float,
            flow.data.ImageCodec([flow.data.ImagePreprocessor("bgr2rgb")]),
            preprocessors=[flow.data.NormByChannelPreprocessor(mean, std, "channels_first")])
        small = flow.data.BlobConf("img", (2, 2, 3), flow.uint8, flow.data.ImageCodec(
            [flow.data.ImageResizePreprocessor(2, 2)]))
        label = flow.data.BlobConf("y", (1,), flow.int32, flow.data.RawCodec())
        return flow.data.decode_ofrecord(str(tmp_path), [conf, small, label], batch_size=2)

    with pytest.warns(DeprecationWarning, match="decode_ofrecord is deprecated"):
        images, small, labels = job()
    expected = ((pictures.astype(np.float32) - mean) / std).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(images, expected, rtol=1e-6)
    assert small.shape == (2, 2, 2, 3) and labels.tolist() == [[0], [1]]


def test_decode_random_draws_new_values_each_step():
    flow.random.seed(5)

    @flow.global_function(type="predict")
    def noise() -> tp.Numpy:
        return flow.data.decode_random((2, 3), flow.float, batch_size=4)

    a, b = noise(), noise()
    assert a.shape == (4, 2, 3) and a.dtype == np.float32
    assert 0 <= a.min() and a.max() < 1 and not np.array_equal(a, b)
    flow.clear_default_session()
    flow.random.seed(5)

    @flow.global_function(type="predict")
    def again() -> tp.Numpy:
        return flow.data.decode_random((2, 3), flow.float, batch_size=4)

    np.testing.assert_array_equal(again(), a)


def test_errors_name_what_is_wrong(tmp_path):
    data_dir = _numbers(tmp_path, n=4, parts=1)
    with pytest.raises(FileNotFoundError, match="no part file .*part-1"):
        _index_job(data_dir, 2, parts=2)()
    flow.clear_default_session()

    def decoder_job(**kwargs):
        @flow.global_function(type="predict")
        def job() -> tp.Numpy:
            records = flow.data.ofrecord_reader(data_dir, batch_size=2)
            return flow.data.OFRecordRawDecoder(records, **kwargs)
        return job

    with pytest.raises(ValueError, match="field 'nope' not found"):
        decoder_job(blob_name="nope", shape=(1,), dtype=flow.float)()
    flow.clear_default_session()
    with pytest.raises(ValueError, match="holds 2 values, the decoder's shape \\(3,\\) needs 3"):
        decoder_job(blob_name="x", shape=(3,), dtype=flow.float)()
    flow.clear_default_session()
    with pytest.raises(NotImplementedError, match="dim1_varying_length"):
        decoder_job(blob_name="x", shape=(2,), dtype=flow.float, dim1_varying_length=True)()
    flow.clear_default_session()
    with pytest.raises(TypeError, match="input_blob must be what flow.data.ofrecord_reader"):
        @flow.global_function(type="predict")
        def not_records(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            return flow.data.OFRecordRawDecoder(x, "x", (2,), flow.float)
        not_records(np.zeros(2, np.float32))
    flow.clear_default_session()
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        _index_job(data_dir, 0, parts=1)()


def test_clearing_the_session_stops_the_loaders(tmp_path):
    read = _index_job(_numbers(tmp_path), batch_size=2)
    read()
    assert any(t.name == "aioflow-loader" for t in threading.enumerate())
    flow.clear_default_session()
    assert not any(t.name == "aioflow-loader" and t.is_alive() for t in threading.enumerate())
