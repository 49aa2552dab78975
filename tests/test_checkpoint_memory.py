"""Checkpoints saved and loaded from async code do not each keep a copy per thread
(issue 28's training soak).

Awaited, a save, a load or ``get_all_variables`` copies every variable on a worker thread.
glibc gives every thread that allocates its own arena, and an arena keeps the blocks freed
in it for reuse (aioflow raises the thresholds for that: ``aioflow.runtime.malloc``), so
each of the event loop's executor threads (up to min(32, CPUs + 4)) that ever ran one kept
a checkpoint-sized block: the 30-minute soak's trainer grew by 4.7 MiB steps, and saves of
a 16 MiB checkpoint spread over six threads held 96 MiB. They now all run on one thread."""
import asyncio
import concurrent.futures
import os
import platform

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc" or not os.path.exists("/proc/self/statm"),
    reason="glibc's per-thread arenas; RSS from /proc")


def _rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def test_awaited_checkpoint_copies_do_not_pile_up_one_per_executor_thread(tmp_path):
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        for i in range(4):   # 4 x 4 MiB: a 16 MiB checkpoint
            x = x + flow.math.reduce_sum(flow.get_variable(
                f"v{i}", shape=(1024, 1024), initializer=flow.ones_initializer()))
        return x

    async def main():
        loop = asyncio.get_running_loop()
        loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(6))
        await job(np.zeros(2, np.float32))
        await flow.checkpoint.save(str(tmp_path / "first"))
        before, grown = _rss_mib(), []
        for round_ in range(2):   # six at once: each on its own executor thread
            await asyncio.gather(*(flow.checkpoint.save(str(tmp_path / f"c{round_}{i}"))
                                   for i in range(6)))
            grown.append(_rss_mib() - before)
            await asyncio.gather(*(flow.train.CheckPoint().load(str(tmp_path / f"c{round_}{i}"))
                                   for i in range(6)))
            grown.append(_rss_mib() - before)
        return [round(g, 1) for g in grown]

    grown = asyncio.run(main())
    # before: +80 to +120 MiB (a copy per thread, and more); now the one thread's copy
    assert max(grown) < 3 * 16, grown
