"""flow.data.Loader: batching, shuffling, epochs, sources, errors, stopping, async for."""
import asyncio
import threading
import time

import anyio
import numpy as np
import pytest

import aioflow as flow

X = np.arange(20, dtype=np.float32).reshape(10, 2)
Y = np.arange(10, dtype=np.int32)


def _loader_threads():
    return [t for t in threading.enumerate() if t.name == "aioflow-loader"]


def test_batches_in_order_with_drop_last():
    batches = list(flow.data.Loader((X, Y), batch_size=4))
    assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    np.testing.assert_array_equal(batches[0][0], X[:4])
    assert len(flow.data.Loader((X, Y), batch_size=4)) == 2


def test_keep_last_partial_batch_and_epochs():
    loader = flow.data.Loader((X, Y), batch_size=4, drop_last=False, epochs=2)
    sizes = [len(b[1]) for b in loader]
    assert sizes == [4, 4, 2, 4, 4, 2] and len(loader) == 6


def test_shuffle_is_seeded_and_changes_each_epoch():
    def labels(seed):
        return [b[1].tolist() for b in flow.data.Loader(
            (X, Y), batch_size=5, shuffle=True, seed=seed, epochs=2)]
    first = labels(7)
    assert first == labels(7)
    assert first != labels(8)
    assert first[0] + first[1] != first[2] + first[3]  # a new order in epoch 2
    assert sorted(first[0] + first[1]) == list(range(10))


def test_dict_and_npz_sources(tmp_path):
    batch = next(iter(flow.data.Loader({"x": X, "y": Y}, batch_size=3)))
    assert set(batch) == {"x", "y"} and batch["y"].tolist() == [0, 1, 2]
    path = tmp_path / "d.npz"
    np.savez(path, images=X, labels=Y)
    images, labels = next(iter(flow.data.Loader(path, batch_size=2, keys=["images", "labels"])))
    assert labels.tolist() == [0, 1]
    with pytest.raises(KeyError, match="no arrays"):
        flow.data.Loader(path, keys=["nope"])


def test_iterable_and_async_iterable_sources():
    assert list(flow.data.Loader(iter(range(5)))) == [0, 1, 2, 3, 4]

    async def agen():
        for i in range(3):
            await asyncio.sleep(0)
            yield i * 10

    assert list(flow.data.Loader(agen())) == [0, 10, 20]


def test_worker_error_surfaces_at_the_consumer_in_place():
    def source():
        yield 1
        raise OSError("disk gone")

    got = []
    with pytest.raises(OSError, match="disk gone"):
        for item in flow.data.Loader(source()):
            got.append(item)
    assert got == [1]


def test_break_stops_the_worker():
    loader = flow.data.Loader((np.zeros((1000, 2)), np.zeros(1000)), batch_size=1)
    for i, _ in enumerate(loader):
        if i == 2:
            break
    deadline = time.monotonic() + 5
    while _loader_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _loader_threads()


@pytest.mark.anyio
async def test_async_for_and_prefetch_overlaps_io():
    """While the consumer works on item i, the loader reads item i + 1. Judged from when
    each item was read and when the consumer finished the one before, not from a total
    time, which a loaded host's preemptions would decide."""
    read_at = []

    def slow_source():
        for i in range(6):
            time.sleep(0.02)  # I/O-like wait, releases the GIL
            read_at.append(time.perf_counter())
            yield i

    got, worked_until = [], []
    async for item in flow.data.Loader(slow_source(), prefetch=3):
        await anyio.sleep(0.04)  # the consumer's own work, twice the reading
        worked_until.append(time.perf_counter())
        got.append(item)
    assert got == list(range(6))
    # in sequence, item i + 1 would be read only after the work on item i
    ahead = [read_at[i + 1] < worked_until[i] for i in range(5)]
    assert sum(ahead) >= 4, (read_at, worked_until)


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="batch_size"):
        flow.data.Loader((X, Y), batch_size=0)
    with pytest.raises(ValueError, match="prefetch"):
        flow.data.Loader((X, Y), prefetch=0)
    with pytest.raises(ValueError, match="first axis"):
        flow.data.Loader((X, Y[:5]))
    with pytest.raises(TypeError, match="source"):
        flow.data.Loader(42)
