"""flow.data.onerec_reader and OneRecDecoder inside jobs: every field as written, step
after step, shuffled or not, padded and dynamic, and errors that say what is wrong."""
from typing import Tuple

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow.data import onerec


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _records(n):
    rng = np.random.default_rng(0)
    return [{"index": np.int32(i),
             "dense": rng.normal(size=(2, 3)).astype(np.float32),
             "ids": rng.integers(-2**40, 2**40, size=4),                     # int64
             "flags": rng.integers(-128, 128, size=5).astype(np.int8),
             "weight": np.array([rng.normal()]),                             # float64
             "name": f"record {i}"} for i in range(n)]


def _files(tmp_path, n=10, num_files=3):
    records = _records(n)
    return onerec.write_onerec(tmp_path, records, num_files=num_files), records


def _index_job(files, batch_size, **reader):
    @flow.global_function(type="predict")
    def read() -> Tuple[tp.Numpy, tp.Numpy]:
        examples = flow.data.onerec_reader(files, batch_size=batch_size, **reader)
        index = flow.data.OneRecDecoder(examples, "index", flow.int32, (1,))
        dense = flow.data.onerec_decoder(examples, "dense", flow.float, (2, 3))
        return index, dense
    return read


def test_every_field_reads_back_as_written(tmp_path):
    files, records = _files(tmp_path)

    @flow.global_function(type="predict")
    def read() -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy]:
        examples = flow.data.onerec_reader(files, batch_size=4)
        decode = flow.data.OneRecDecoder
        return (decode(examples, "index", flow.int32, (1,)),
                decode(examples, "dense", flow.float, (2, 3)),
                decode(examples, "ids", flow.int64, (4,)),
                decode(examples, "flags", flow.int8, (5,)),
                decode(examples, "weight", flow.double, (1,)))

    for step in range(4):   # 16 records of a 10-record set: the stream starts over
        expected = [records[(4 * step + i) % 10] for i in range(4)]
        got = read()
        for key, array in zip(["index", "dense", "ids", "flags", "weight"], got):
            want = np.stack([np.asarray(r[key]).reshape(array.shape[1:]) for r in expected])
            assert array.dtype == want.dtype, key
            np.testing.assert_array_equal(array, want, err_msg=f"{key}, step {step}")


def test_instance_shuffle_draws_from_a_seeded_buffer(tmp_path):
    files, records = _files(tmp_path, n=12, num_files=2)
    orders = []
    for _ in range(2):
        flow.clear_default_session()
        read = _index_job(files, 12, random_shuffle=True, shuffle_buffer_size=4, seed=3)
        steps = [read() for _ in range(4)]
        for index, dense in steps:   # the fields of one example stay together
            np.testing.assert_array_equal(
                dense, np.stack([records[i]["dense"] for i in index[:, 0]]))
        orders.append(np.concatenate([index[:, 0] for index, _ in steps]))
    np.testing.assert_array_equal(orders[0], orders[1])   # the seed fixes the order
    drawn = orders[0]
    assert drawn[:12].tolist() != list(range(12))
    # 52 examples entered the 4-example buffer for 48 draws: each came out 3 to 5 times
    assert drawn.size == 48 and set(np.bincount(drawn, minlength=12).tolist()) <= {3, 4, 5}


def test_batch_shuffle_moves_whole_batches(tmp_path):
    files, _ = _files(tmp_path, n=12, num_files=1)
    read = _index_job(files, 3, random_shuffle=True, shuffle_mode="batch",
                      shuffle_buffer_size=2, seed=1)
    batches = [read()[0][:, 0].tolist() for _ in range(16)]
    for batch in batches:   # a batch is 3 consecutive examples, as read
        assert batch[0] % 3 == 0 and batch == list(range(batch[0], batch[0] + 3))
    assert [b[0] for b in batches] != [3 * (i % 4) for i in range(16)]
    counts = np.bincount([b[0] // 3 for b in batches], minlength=4)
    assert counts.sum() == 16 and counts.min() >= 2   # 18 batches entered for 16 draws


def test_shuffle_after_epoch_keeps_each_epochs_examples(tmp_path):
    files, _ = _files(tmp_path, n=12, num_files=6)
    read = _index_job(files, 12, shuffle_after_epoch=True, seed=0)
    epochs = [read()[0][:, 0].tolist() for _ in range(4)]
    assert all(sorted(epoch) == list(range(12)) for epoch in epochs)   # the same multiset
    # OneFlow's OneRec reader shuffles the files before the first epoch too
    assert epochs[0] != list(range(12)) and len({tuple(e) for e in epochs}) > 1
    for epoch in epochs:   # whole files move: pairs (2k, 2k+1) stay together
        assert all(epoch[i] // 2 == epoch[i + 1] // 2 for i in range(0, 12, 2))


def _sequences(tmp_path):
    lengths = [1, 3, 2, 4, 2, 2]
    records = [{"seq": np.arange(10 * i, 10 * i + n, dtype=np.int32).reshape(n, 1),
                "flat": np.arange(6, dtype=np.float32) + i} for i, n in enumerate(lengths)]
    return onerec.write_onerec(tmp_path, records), records


def test_batch_padding_reshape_and_dynamic_blobs(tmp_path):
    files, records = _sequences(tmp_path)

    @flow.global_function(type="predict")
    def read() -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy]:
        examples = flow.data.onerec_reader(files, batch_size=3)
        dynamic = flow.data.OneRecDecoder(examples, "seq", flow.int32, (5, 1),
                                          is_dynamic=True, batch_padding=(-1, 0))
        fixed = flow.data.OneRecDecoder(examples, "seq", flow.int32, (5, 1),
                                        batch_padding=(5, 0))
        grid = flow.data.OneRecDecoder(examples, "flat", flow.float, (2, 3),
                                       reshape=(-1, 3))
        # inside the job the dynamic blob is its static (5, 1), zeros after the valid rows
        return dynamic, fixed, flow.math.reduce_sum(dynamic, axis=[1, 2]), grid

    for step in range(2):
        batch = records[3 * step:3 * step + 3]
        dynamic, fixed, sums, grid = read()
        longest = max(len(r["seq"]) for r in batch)
        padded = np.zeros((3, 5, 1), np.int32)
        for row, r in zip(padded, batch):
            row[:len(r["seq"])] = r["seq"]
        np.testing.assert_array_equal(fixed, padded)
        np.testing.assert_array_equal(dynamic, padded[:, :longest])   # the valid part
        np.testing.assert_array_equal(sums, [r["seq"].sum() for r in batch])
        np.testing.assert_array_equal(grid, np.stack([r["flat"].reshape(2, 3) for r in batch]))


def _decoder_job(files, **decoder):
    @flow.global_function(type="predict")
    def job() -> tp.Numpy:
        examples = flow.data.onerec_reader(files, batch_size=2)
        return flow.data.OneRecDecoder(examples, **decoder)
    return job


@pytest.mark.parametrize("decoder, message", [
    (dict(key="nope", dtype=flow.int32, shape=(1,)),
     r"key 'nope' not found in the example \(it has \['dense', 'flags', 'ids', "),
    (dict(key="dense", dtype=flow.int32, shape=(2, 3)),
     "key 'dense' holds a Float32List, dtype int32 reads a Int32List"),
    (dict(key="dense", dtype=flow.float, shape=(3, 2)),
     r"key 'dense' gives records of shape \(2, 3\), the decoder's shape is \(3, 2\)"),
    (dict(key="ids", dtype=flow.int64, shape=(2, 2)),
     r"key 'ids' holds a tensor of shape \(4,\), the decoder's shape \(2, 2\) has 2 axes"),
    (dict(key="ids", dtype=flow.int64, shape=(2, 2), reshape=(3, -1)),
     r"key 'ids' holds a tensor of shape \(4,\) \(4 values\), which reshape \(3, -1\) cannot"),
])
def test_decoding_errors_name_the_key_and_what_was_expected(tmp_path, decoder, message):
    files, _ = _files(tmp_path, n=4, num_files=1)
    with pytest.raises(ValueError, match=message):
        _decoder_job(files, **decoder)()


def test_reader_errors_name_the_file(tmp_path):
    files, _ = _files(tmp_path, n=4, num_files=2)
    with pytest.raises(FileNotFoundError, match="no part file .*missing.onerec"):
        _index_job(files + [str(tmp_path / "missing.onerec")], 2)()
    flow.clear_default_session()
    second = tmp_path / files[1].rsplit("/", 1)[1]
    data = bytearray(second.read_bytes())
    data[30] ^= 0xFF   # inside the first payload of the second file
    second.write_bytes(bytes(data))
    read = _index_job(files, 2)
    assert read()[0][:, 0].tolist() == [0, 1]   # the first file is intact
    with pytest.raises(ValueError, match=f"OneRec file {files[1]}: broken record 0 at byte 0: "
                                         "payload checksum"):
        read()


def test_verify_example_checks_the_identifier(tmp_path):
    payload = bytearray(onerec.make_example({"index": np.int32(4), "dense": np.zeros(
        (2, 3), np.float32)}))
    payload[4:8] = b"XXXX"
    path = str(tmp_path / "data.onerec")
    onerec.write_records(path, [bytes(payload)])
    assert _index_job([path], 1, verify_example=False)()[0].tolist() == [[4]]
    flow.clear_default_session()
    with pytest.raises(ValueError, match="no b'1REC' identifier"):
        _index_job([path], 1)()


@pytest.mark.parametrize("call, error, message", [
    (lambda files: flow.data.onerec_reader(files[0]), TypeError,
     "files must be a non-empty list of OneRec file paths"),
    (lambda files: flow.data.onerec_reader(files, shuffle_mode="epoch"), ValueError,
     "shuffle_mode must be one of \\('instance', 'batch'\\), got 'epoch'"),
    (lambda files: flow.data.onerec_reader(files, batch_size=0), ValueError,
     "batch_size must be a positive int, got 0"),
    (lambda files: flow.data.OneRecDecoder(flow.data.onerec_reader(files), "dense",
                                           flow.uint8, (6,)), TypeError,
     "dtype must be one of int8, int32, int64, float32, float64 .*got uint8"),
    (lambda files: flow.data.OneRecDecoder(flow.data.onerec_reader(files), "dense",
                                           flow.float, (2, 3), reshape=(6,)), ValueError,
     "reshape must have as many axes as shape \\(2\\), got \\(6,\\)"),
    (lambda files: flow.data.OneRecDecoder(flow.data.onerec_reader(files), "dense",
                                           flow.float, (2, 3), batch_padding=(-1, 3)),
     ValueError, "batch_padding pads the first axis only"),
    (lambda files: flow.data.OneRecDecoder(files, "dense", flow.float, (2, 3)), TypeError,
     "input_blob must be what flow.data.onerec_reader returned, got list"),
])
def test_bad_arguments_are_refused_when_traced(tmp_path, call, error, message):
    files, _ = _files(tmp_path, n=2, num_files=1)

    @flow.global_function(type="predict")
    def job() -> tp.Numpy:
        call(files)
        return flow.constant(0.0, shape=(1,))

    with pytest.raises(error, match=message):
        job()


def test_records_that_differ_in_one_batch_need_padding(tmp_path):
    files, _ = _sequences(tmp_path)
    with pytest.raises(ValueError, match=r"first-axis sizes \[1, 3\] in one batch; "
                                         r"batch_padding=\(-1, 0\) pads them"):
        _decoder_job(files, key="seq", dtype=flow.int32, shape=(3, 1))()
    flow.clear_default_session()
    with pytest.raises(ValueError, match="first-axis size 3, more than batch_padding's 2"):
        _decoder_job(files, key="seq", dtype=flow.int32, shape=(2, 1), batch_padding=(2, 0))()
    flow.clear_default_session()
    with pytest.raises(ValueError, match=r"records of shape \(3, 1\), the decoder's shape is "
                                         r"\(5, 1\) \(is_dynamic=True takes smaller ones\)"):
        _decoder_job(files, key="seq", dtype=flow.int32, shape=(5, 1),
                     batch_padding=(-1, 0))()
