"""What uvicorn lacks against slow clients and bursts: a deadline for a request's head, and
a connection cap that makes room instead of refusing everyone.

uvicorn bounds header sizes (h11's ``h11_max_incomplete_event_size``), idle keep-alive
connections (``timeout_keep_alive``) and the kernel's accept queue (``backlog``), but:

* a connection that trickles its request line and headers a byte at a time stays open for
  ever (slowloris);
* its one cap, ``limit_concurrency``, counts open connections plus running requests and,
  once the sum reaches it, answers 503 to *every* request: 300 simultaneous clients over a
  cap of 256 get 300 503s, and 256 idle or trickling sockets lock every real client out.

:func:`head_timeout_protocol` returns uvicorn's HTTP protocol class with both fixed:

* a connection that has not completed a request head within ``timeout`` seconds of
  opening, or of its previous response, is closed (and logged once, at INFO);
* with ``max_connections``, a connection that would take the count over the cap makes
  room: the connection that has waited longest for a request head (an idle keep-alive
  one, or one trickling its head), if it has waited at least ``grace`` seconds, is closed
  (logged at INFO). If none has, the new connection is refused: its request gets 503 with
  ``Retry-After`` and ``Connection: close`` as soon as its head arrives, and it is closed
  if that head is not there within ``grace`` seconds. A connection whose request is being
  served is never closed to make room.

Requests in flight are bounded separately, by :class:`aioflow.serving.admission.AdmissionLimit`.
Needs uvicorn (the ``serve`` extra); ``aioflow.serving`` does not import this module.
"""
import collections
import logging

log = logging.getLogger("aioflow.serving")


def head_timeout_protocol(timeout: float, base=None, *, max_connections=None,
                          grace: float = 1.0, retry_after: int = 1):
    """uvicorn's protocol class (``base``; default: what ``http="auto"`` picks, httptools
    when installed, else h11) closing connections whose request head is late, and, with
    ``max_connections``, capping open connections as the module says."""
    if base is None:
        from uvicorn.protocols.http.auto import AutoHTTPProtocol as base
    if max_connections is not None and max_connections < 1:
        raise ValueError(f"max_connections must be >= 1, got {max_connections}")
    # connections waiting for a request head -> when they started waiting (loop time),
    # longest-waiting first: the ones to close first when the server is full
    waiting = collections.OrderedDict()
    busy_body = (b'{"error": "the server has no free connection; retry after %d s"}'
                 % retry_after)

    async def refuse(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 503,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", b"%d" % len(busy_body)),
                                (b"retry-after", b"%d" % retry_after),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": busy_body})

    class HeadTimeoutProtocol(base):
        """Both of uvicorn's HTTP/1.1 protocols set ``self.cycle`` when a request head is
        complete and call ``on_response_complete`` after each response: a timer armed at
        those two moments, that finds ``self.cycle`` unchanged, knows no new head came;
        so does ``data_received``, which takes the connection off the waiting list."""

        _head_timer = None
        _armed_cycle = None
        refused = False

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            if max_connections is not None and len(self.connections) > max_connections \
                    and not self._make_room():
                self.refused = True
                self.app = refuse  # uvicorn runs self.app for each request head
                self._arm_head_timer(grace)
                return
            self._arm_head_timer(timeout)

        def data_received(self, data) -> None:
            super().data_received(data)
            if self.cycle is not self._armed_cycle:
                waiting.pop(self, None)  # a request head arrived

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm_head_timer(grace if self.refused else timeout)

        def connection_lost(self, exc) -> None:
            waiting.pop(self, None)
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            super().connection_lost(exc)

        def _arm_head_timer(self, seconds: float) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            if self.cycle is not None and not self.cycle.response_complete:
                waiting.pop(self, None)
                return  # a pipelined request already arrived: being served, not waiting
            self._armed_cycle = cycle = self.cycle
            self._head_timer = self.loop.call_later(seconds, self._head_deadline, cycle,
                                                    seconds)
            if not self.refused:
                waiting.pop(self, None)
                waiting[self] = self.loop.time()

        def _head_deadline(self, cycle, seconds: float) -> None:
            self._head_timer = None
            if self.cycle is not cycle or self.transport.is_closing():
                return  # a request head arrived in time (or the connection is gone)
            waiting.pop(self, None)
            if not self.refused:
                log.info("closed the connection of %s: no complete request head within %g s",
                         self._client(), seconds)
            self.transport.close()

        def _make_room(self) -> bool:
            """Close the connection that has waited longest for a head, if it has waited
            ``grace`` seconds; False when none has."""
            now = self.loop.time()
            for connection, since in waiting.items():
                if connection.transport.is_closing():
                    continue
                if now - since < grace:
                    return False  # the longest-waiting one is within its grace: all are
                waiting.pop(connection)
                log.info("closed the connection of %s: it waited %.1f s for a request head, "
                         "to make room for a new connection (%d open, the cap is %d)",
                         connection._client(), now - since, len(self.connections),
                         max_connections)
                connection.transport.close()
                return True
            return False

        def _client(self) -> str:
            return "%s:%d" % tuple(self.client[:2]) if self.client else "a client"

    HeadTimeoutProtocol.__name__ = HeadTimeoutProtocol.__qualname__ = \
        f"HeadTimeout{base.__name__}"
    HeadTimeoutProtocol.waiting_for_head = waiting
    return HeadTimeoutProtocol
