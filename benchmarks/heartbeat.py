"""A 1 ms heartbeat task: how long the event loop could not run it (benchmarks' loop gaps)."""
import asyncio
import time


async def heartbeat(stop: asyncio.Event, gaps: list) -> None:
    """Until ``stop`` is set, sleep 1 ms at a time and append each wake-up's gap (s)."""
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
