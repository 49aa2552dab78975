"""What uvicorn lacks against slow clients: a deadline for a request's head.

uvicorn caps connections (``limit_concurrency``), header sizes (h11's
``h11_max_incomplete_event_size``) and idle keep-alive connections
(``timeout_keep_alive``), but a connection that trickles its request line and headers a
byte at a time stays open for ever (slowloris), and it counts against
``limit_concurrency``: a hundred of them and every real request gets 503.
:func:`head_timeout_protocol` returns uvicorn's HTTP protocol class with a deadline: a
connection that has not completed a request head within ``timeout`` seconds of opening,
or of its previous response, is closed (and logged once, at INFO).

Needs uvicorn (the ``serve`` extra); ``aioflow.serving`` does not import this module.
"""
import logging

log = logging.getLogger("aioflow.serving")


def head_timeout_protocol(timeout: float, base=None):
    """uvicorn's protocol class (``base``; default: what ``http="auto"`` picks, httptools
    when installed, else h11) closing connections whose request head is late."""
    if base is None:
        from uvicorn.protocols.http.auto import AutoHTTPProtocol as base

    class HeadTimeoutProtocol(base):
        """Both of uvicorn's HTTP/1.1 protocols set ``self.cycle`` when a request head is
        complete and call ``on_response_complete`` after each response: a timer armed at
        those two moments, that finds ``self.cycle`` unchanged, knows no new head came."""

        _head_timer = None

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm_head_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm_head_timer()

        def connection_lost(self, exc) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            super().connection_lost(exc)

        def _arm_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            cycle = self.cycle
            self._head_timer = self.loop.call_later(timeout, self._head_deadline, cycle)

        def _head_deadline(self, cycle) -> None:
            self._head_timer = None
            if self.cycle is not cycle or self.transport.is_closing():
                return  # a request head arrived in time (or the connection is gone)
            client = "%s:%d" % tuple(self.client[:2]) if self.client else "a client"
            log.info("closed the connection of %s: no complete request head within %g s",
                     client, timeout)
            self.transport.close()

    HeadTimeoutProtocol.__name__ = HeadTimeoutProtocol.__qualname__ = \
        f"HeadTimeout{base.__name__}"
    return HeadTimeoutProtocol
