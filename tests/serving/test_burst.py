"""examples/serve_mnist.py under a burst and under slowloris (issue 28, defect 1): the server
serves up to its capacity and refuses only the excess, at once, with 503 and
``Retry-After``; connections that are idle or trickle their request head give way to new
clients.

Scaled-down versions of ``benchmarks/serve_abuse.py``'s ``burst`` and ``slowloris-500``
phases, against a real uvicorn process (sockets). Before the fix, uvicorn's
``limit_concurrency`` (256) counted open connections: 300 simultaneous clients got 300
503s, and 300 trickling connections got every normal request a 503.
"""
import asyncio
import json
import time

import pytest

from aioflow.serving.admission import Admission
from serving_helpers import ServerProcess

pytestmark = pytest.mark.timeout(90)

PREDICT = "/v1/models/mnist:predict"
BODY = json.dumps({"instances": [[0.5] * 784]}).encode()
REQUEST = (f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(BODY)}\r\n\r\n").encode() + BODY


@pytest.fixture
def server_with(checkpoint, tmp_path):
    """Start ``serve_mnist.py`` with extra flags; stopped at the end of the test."""
    started = []

    def start(*flags):
        process = ServerProcess(checkpoint, tmp_path / f"server{len(started)}.log",
                                "--log-level", "info", *flags)
        started.append(process)
        process.wait_healthy()
        return process
    yield start
    for process in started:
        process.stop()


async def read_response(reader, timeout):
    """(status, lowercased head) of one response; None if the server closed first."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length")), 0)
    await asyncio.wait_for(reader.readexactly(length), timeout)
    return int(head.split()[1]), head.decode().lower()


async def one_request(port, timeout=40.0):
    """A new connection, one predict: (status or what happened, head, seconds)."""
    started = time.monotonic()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        return f"connect: {type(exc).__name__}", "", time.monotonic() - started
    try:
        writer.write(REQUEST)
        response = await read_response(reader, timeout)
    except (OSError, asyncio.TimeoutError) as exc:
        response = (type(exc).__name__, "")
    finally:
        writer.close()
    status, head = response if response is not None else ("closed", "")
    return status, head, time.monotonic() - started


def tally(results):
    counts = {}
    for status, _, _ in results:
        counts[status] = counts.get(status, 0) + 1
    return counts


async def test_300_simultaneous_clients_are_all_served_with_the_default_limits(server_with):
    # the figure: 300 clients at once over the old cap of 256 got 0 answers
    server = server_with()
    results = await asyncio.gather(*(one_request(server.port) for _ in range(300)))
    assert tally(results) == {200: 300}, tally(results)


async def test_beyond_capacity_only_the_excess_is_refused_at_once_with_retry_after(server_with):
    # 8 requests in flight and 32 waiting: of 300 at once, at least 40 are served, and the
    # others get 503 with Retry-After at once, not after queueing
    server = server_with("--max-inflight", "8", "--max-waiting", "32")
    results = await asyncio.gather(*(one_request(server.port) for _ in range(300)))
    counts = tally(results)
    assert set(counts) <= {200, 503} and counts.get(200, 0) >= 40, counts
    refused = [(head, seconds) for status, head, seconds in results if status == 503]
    assert refused, counts
    assert all("retry-after: 1" in head for head, _ in refused)
    fastest_served = min(seconds for status, _, seconds in results if status == 200)
    slowest_refused = max(seconds for _, seconds in refused)
    # refused before most of the served ones were answered (each waits for a batch)
    assert slowest_refused < 5.0, (slowest_refused, fastest_served, counts)
    metrics = (await asyncio.to_thread(server_metrics, server))
    assert 'serve_mnist_admission_refused_total{reason="queue full"}' in metrics, metrics


def server_metrics(server) -> str:
    import urllib.request
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as response:
        return response.read().decode()


async def slowloris(port, seconds, every, started_at=None):
    """A connection trickling a request head, a byte every ``every`` s, for ``seconds``:
    (when it opened, how long it stayed open before the server closed it, or None)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    opened = time.monotonic()
    if started_at is not None:
        started_at.append(opened)
    head = f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\nX-Slow: {'a' * 1000}".encode()
    try:
        for byte in head:
            if time.monotonic() - opened > seconds:
                return opened, None
            try:
                writer.write(bytes([byte]))
                await writer.drain()
                if await asyncio.wait_for(reader.read(1), every) == b"":
                    return opened, time.monotonic() - opened
            except asyncio.TimeoutError:
                continue
            except OSError:
                return opened, time.monotonic() - opened
        return opened, None
    finally:
        writer.close()


async def normal_clients(port, seconds):
    """Sequential predicts, a new connection each, for ``seconds``: the statuses."""
    statuses = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        statuses.append((await one_request(port, timeout=10))[0])
    return statuses


async def test_300_slowloris_connections_do_not_starve_normal_clients(server_with):
    # over the old cap (256) of open connections, each trickling its head for 3 s: before
    # the fix every normal request meanwhile got 503
    server = server_with("--header-timeout", "5")
    unloaded = await normal_clients(server.port, 1.0)
    trickling = [asyncio.ensure_future(slowloris(server.port, 3.0, 0.5)) for _ in range(300)]
    await asyncio.sleep(0.5)  # all of them open
    loaded = await normal_clients(server.port, 1.5)
    await asyncio.gather(*trickling)
    assert set(unloaded) == {200} and set(loaded) == {200}, (unloaded, loaded)
    # the rate is measured in benchmarks/serve_abuse.py (>= 80% of unloaded); here, on a
    # shared CI machine where this process runs the 300 tricklers too, half of it
    assert len(loaded) / 1.5 >= 0.5 * len(unloaded) / 1.0, (len(unloaded), len(loaded))


async def test_when_connections_are_full_the_longest_waiting_for_a_head_are_closed(server_with):
    # a cap of 64 connections, 60 tricklers older than the grace period: each new normal
    # client takes the place of the one that has waited longest for its head
    server = server_with("--max-connections", "64", "--header-timeout", "30",
                         "--connection-grace", "0.5")
    opened = []
    old = [asyncio.ensure_future(slowloris(server.port, 6.0, 0.2, opened)) for _ in range(60)]
    await asyncio.sleep(1.0)
    statuses = await normal_clients(server.port, 1.0)
    young = [asyncio.ensure_future(slowloris(server.port, 1.0, 0.2)) for _ in range(20)]
    await asyncio.sleep(0.2)
    during = await normal_clients(server.port, 1.0)
    results = await asyncio.gather(*old, *young)
    assert set(statuses) == {200} and set(during) == {200}, (statuses, during)
    closed = [held for _, held in results[:60] if held is not None]
    assert len(closed) >= 80 - 64, results[:60]  # the old ones made room for the young
    assert all(held is None for _, held in results[60:]), results[60:]  # never the young
    assert "to make room for a new connection" in server.log()


async def test_when_no_connection_can_make_room_the_new_one_gets_503_and_is_closed(
        server_with):
    # 20 tricklers within their grace period fill a cap of 20: a new client is refused
    # at once, with Retry-After, and its connection closed
    server = server_with("--max-connections", "20", "--header-timeout", "30",
                         "--connection-grace", "10")
    trickling = [asyncio.ensure_future(slowloris(server.port, 2.0, 0.2)) for _ in range(20)]
    await asyncio.sleep(0.5)
    status, head, seconds = await one_request(server.port)
    await asyncio.gather(*trickling)
    assert status == 503 and "retry-after: 1" in head and "connection: close" in head, \
        (status, head)
    assert seconds < 2.0
    assert (await one_request(server.port))[0] == 200  # room again once they are gone


async def test_admission_serves_in_order_refuses_the_excess_and_never_leaks_a_slot():
    admission = Admission(max_inflight=2, max_waiting=3, wait_timeout=0.3)
    order = []

    async def request(i, hold):
        refused = await admission.acquire()
        if refused is None:
            order.append(i)
            try:
                await asyncio.sleep(hold)
            finally:
                admission.release()
        return refused
    # 2 served at once, 3 wait (first come first served), 2 refused at once
    results = await asyncio.gather(*(request(i, 0.05) for i in range(7)))
    assert results == [None] * 5 + ["queue full"] * 2 and order == [0, 1, 2, 3, 4]
    # a waiter whose slot does not come within wait_timeout is refused; one cancelled
    # while waiting is skipped; the slots all come back
    holders = [asyncio.ensure_future(request(i, 0.6)) for i in range(2)]
    await asyncio.sleep(0)
    cancelled = asyncio.ensure_future(request(9, 0))
    timed_out = asyncio.ensure_future(request(8, 0))
    await asyncio.sleep(0.01)
    cancelled.cancel()
    assert await timed_out == "waited too long"
    await asyncio.gather(*holders)
    assert admission.inflight == 0 and admission.waiting == 0
    assert admission.metrics()["refused"] == {"queue full": 2, "waited too long": 1}


async def test_health_and_metrics_are_neither_queued_nor_refused_when_full():
    # docs/faults.md: /healthz and /metrics bypass the request limits; with the one slot
    # held and no room to wait, a predict is refused while they are answered at once
    from aioflow.serving.admission import AdmissionLimit
    admission = Admission(max_inflight=1, max_waiting=0, wait_timeout=0.3)
    release = asyncio.Event()

    async def app(scope, receive, send):
        if scope["path"] == "/slow":
            await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})
    limit = AdmissionLimit(app, admission)

    async def call(path):
        sent = []

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            sent.append(message)
        await limit({"type": "http", "path": path, "method": "GET", "headers": []},
                    receive, send)
        return sent[0]["status"]
    holder = asyncio.ensure_future(call("/slow"))
    await asyncio.sleep(0.01)
    assert admission.inflight == 1
    assert await call(PREDICT) == 503
    assert await asyncio.wait_for(call("/healthz"), 1) == 200
    assert await asyncio.wait_for(call("/metrics"), 1) == 200
    release.set()
    assert await holder == 200 and admission.inflight == 0
