"""Admission control for an ASGI app: a bounded number of requests in flight, a bounded
queue of requests waiting for a slot, and the excess refused at once with 503 and
``Retry-After``.

What a server must bound under a burst is the work it has started (request bodies held in
memory, parses, queued samples), not the sockets it holds: a burst of 2,000 simultaneous
requests is served ``max_inflight`` at a time, first come first served, while up to
``max_waiting`` more wait (costing a socket each, their bodies unread); only beyond that,
or after ``wait_timeout`` seconds in the queue, is a request refused. uvicorn's own cap,
``limit_concurrency``, counts open connections plus running requests and answers 503 to
every request once the sum reaches it, and Starlette has no such middleware: hence this
one, a plain ASGI middleware with no dependency::

    admission = Admission(max_inflight=256, max_waiting=2048, wait_timeout=10)
    app = Starlette(routes=..., middleware=[Middleware(AdmissionLimit, admission=admission)])

Paths in ``exempt`` (health checks, metrics) are never queued nor refused. Connections are
bounded by :func:`aioflow.serving.http_limits.head_timeout_protocol`.
"""
import asyncio
import collections

REFUSED_FULL = "queue full"
REFUSED_WAIT = "waited too long"


class Admission:
    """The shared state: slots, the FIFO of waiters, counters. Belongs to one event loop."""

    def __init__(self, max_inflight: int = 256, max_waiting: int = 2048,
                 wait_timeout=10.0, retry_after: int = 1,
                 exempt=("/healthz", "/metrics")):
        if max_inflight < 1 or max_waiting < 0:
            raise ValueError(f"max_inflight must be >= 1 and max_waiting >= 0, got "
                             f"{max_inflight}, {max_waiting}")
        self.max_inflight, self.max_waiting = max_inflight, max_waiting
        self.wait_timeout, self.retry_after = wait_timeout, retry_after
        self.exempt = frozenset(exempt)
        self.inflight = 0
        self.waiting = 0
        self._waiters = collections.deque()  # futures, first come first served
        self.admitted = 0
        self.queued = 0
        self.refused = {REFUSED_FULL: 0, REFUSED_WAIT: 0}

    async def acquire(self):
        """Take a slot (None), or the reason it is refused."""
        if self.inflight < self.max_inflight and not self.waiting:
            self.inflight += 1
            self.admitted += 1
            return None
        if self.waiting >= self.max_waiting:
            self.refused[REFUSED_FULL] += 1
            return REFUSED_FULL
        granted = asyncio.get_running_loop().create_future()
        self._waiters.append(granted)
        self.waiting += 1
        self.queued += 1
        try:
            # release() hands its slot over by setting the result; a waiter that times
            # out or is cancelled first is skipped (its future is done)
            await asyncio.wait_for(granted, self.wait_timeout)
        except asyncio.TimeoutError:
            self.refused[REFUSED_WAIT] += 1
            return REFUSED_WAIT
        finally:
            self.waiting -= 1
        self.admitted += 1
        return None

    def release(self) -> None:
        """Give the slot to the first waiter still waiting, or free it."""
        while self._waiters:
            granted = self._waiters.popleft()
            if not granted.done():
                granted.set_result(None)
                return
        self.inflight -= 1

    def metrics(self) -> dict:
        return {"inflight": self.inflight, "waiting": self.waiting,
                "max_inflight": self.max_inflight, "max_waiting": self.max_waiting,
                "admitted": self.admitted, "queued": self.queued,
                "refused": dict(self.refused)}

    def prometheus(self, prefix: str) -> str:
        """The counters and gauges in Prometheus' text format, names ``prefix_...``."""
        lines = [f"# HELP {prefix}_inflight requests being served (at most "
                 f"{self.max_inflight})", f"# TYPE {prefix}_inflight gauge",
                 f"{prefix}_inflight {self.inflight}",
                 f"# HELP {prefix}_waiting requests waiting for a slot (at most "
                 f"{self.max_waiting})", f"# TYPE {prefix}_waiting gauge",
                 f"{prefix}_waiting {self.waiting}",
                 f"# HELP {prefix}_admitted_total requests admitted",
                 f"# TYPE {prefix}_admitted_total counter",
                 f"{prefix}_admitted_total {self.admitted}",
                 f"# HELP {prefix}_queued_total requests that waited for a slot",
                 f"# TYPE {prefix}_queued_total counter",
                 f"{prefix}_queued_total {self.queued}",
                 f"# HELP {prefix}_refused_total requests refused with 503, by reason",
                 f"# TYPE {prefix}_refused_total counter"]
        lines += [f'{prefix}_refused_total{{reason="{reason}"}} {n}'
                  for reason, n in self.refused.items()]
        return "\n".join(lines) + "\n"


class AdmissionLimit:
    """ASGI middleware: each HTTP request outside ``admission.exempt`` holds one of
    ``admission``'s slots while the app serves it; a request refused gets 503, a JSON
    ``{"error": ...}`` and ``Retry-After``, without its body being read."""

    def __init__(self, app, admission: Admission):
        self.app, self.admission = app, admission

    async def __call__(self, scope, receive, send) -> None:
        admission = self.admission
        if scope["type"] != "http" or scope["path"] in admission.exempt:
            await self.app(scope, receive, send)
            return
        refused = await admission.acquire()
        if refused is not None:
            await self._refuse(send, refused)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            admission.release()

    async def _refuse(self, send, reason: str) -> None:
        admission = self.admission
        if reason == REFUSED_FULL:
            why = (f"{admission.max_inflight} requests in flight and {admission.max_waiting} "
                   "waiting")
        else:
            why = f"no slot freed within {admission.wait_timeout:g} s"
        body = (b'{"error": "the server is busy (%s); retry after %d s"}'
                % (why.encode(), admission.retry_after))
        await send({"type": "http.response.start", "status": 503,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", b"%d" % len(body)),
                                (b"retry-after", b"%d" % admission.retry_after)]})
        await send({"type": "http.response.body", "body": body})
