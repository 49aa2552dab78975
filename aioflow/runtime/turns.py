"""Loop turns: a burst of awaited calls started at once shares the caller's event loop.

``asyncio.gather(*(job(x) for _ in range(100)))`` starts a hundred tasks in one iteration
of the loop, and each one's first step binds, copies and submits its call (50-100 us on a
2-core VM, more while other threads contend for the GIL). Run back to back, those steps
held the loop for 6-20 ms, so a 1 ms heartbeat, an HTTP request or a timer waited that
long (issue 29). With turns, the calls of one iteration take at most :data:`BUDGET`
seconds of the loop (0.25 ms); the others wait for a later iteration, first come first
served, so the loop's timers and I/O run in between and the steps keep call order.

Only the caller's loop-side work is spread. A job call does all of its set-up at its turn
(binding and checking its arguments, copying them, submitting: ``calls.await_value``),
so a call of a burst reads its arguments when its turn comes, and cancelling it while it
waits means its step never runs.

>>> import asyncio
>>> async def three_calls():
...     order = []
...     async def call(n):
...         async with turn():
...             order.append(n)
...     await asyncio.gather(*(call(n) for n in range(3)))
...     return order
>>> asyncio.run(three_calls())
[0, 1, 2]
"""
from __future__ import annotations

import asyncio
import collections
import time
import weakref

#: Seconds of call set-up a loop iteration may run before later calls wait for the next
#: one. The iteration right after a burst of N calls also runs the N tasks' first steps
#: (~3 us each for those that wait) and the running calls' uncharged hand-offs: with
#: 0.25 ms, 100 gathered calls kept the loop's CPU between two 1 ms beats at 1.5-2.5 ms
#: (2.0-4.0 ms with 0.5 ms), while a burst still starts ~5-10 calls per iteration (a few
#: microseconds of loop overhead each).
BUDGET = 0.00025

# Loops that take no attribute (share_of), in several threads, each add their own entry
# (one dict operation each); a share's fields are touched only on its loop's thread.
_shares: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopShare]" = (
    weakref.WeakKeyDictionary())


class _LoopShare:
    """One loop's account: time spent this iteration, and the calls waiting their turn.
    Owned by that loop's thread (no lock)."""

    __slots__ = ("_loop", "spent", "waiting", "granted", "cost", "reset_scheduled",
                 "__weakref__")

    def __init__(self, loop):
        # Weakly: the account is the value of its loop in _shares, which a strong
        # reference back to the key would keep alive forever.
        self._loop = weakref.ref(loop)
        self.spent = 0.0
        self.waiting: collections.deque[asyncio.Future] = collections.deque()
        self.granted = 0          # woken, not yet run: later calls queue behind them
        self.cost = 50e-6         # running mean of one call's set-up (seconds)
        self.reset_scheduled = False

    def must_wait(self) -> bool:
        return self.spent >= BUDGET or bool(self.waiting) or self.granted > 0

    async def wait_turn(self) -> None:
        """Wait, in call order, for an iteration with budget left (``must_wait`` said so)."""
        waiter = self._loop().create_future()
        self.waiting.append(waiter)
        self._schedule_reset()
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.granted -= 1     # woken, then cancelled: pass the turn on
            else:
                try:
                    self.waiting.remove(waiter)
                except ValueError:
                    pass
            raise
        self.granted -= 1

    def charge(self, seconds: float) -> None:
        self.spent += seconds
        self.cost += 0.2 * (seconds - self.cost)
        self._schedule_reset()

    def _schedule_reset(self) -> None:
        # call_soon from inside an iteration runs in the next one: the account is per
        # iteration without asyncio having to say where one ends.
        if not self.reset_scheduled:
            self.reset_scheduled = True
            self._loop().call_soon(self._reset)

    def _reset(self) -> None:
        """A new iteration: wake as many waiting calls as its budget fits, in order."""
        self.reset_scheduled = False
        self.spent = 0.0
        fits = max(1, int(BUDGET / max(self.cost, 1e-6)))
        while self.waiting and fits:
            waiter = self.waiting.popleft()
            if not waiter.done():      # (a cancelled waiter gave up its place)
                waiter.set_result(None)
                self.granted += 1
                fits -= 1
        if self.waiting or self.granted:
            self._schedule_reset()


def share_of(loop) -> _LoopShare:
    """The running ``loop``'s account: kept on the loop object itself where it takes an
    attribute (asyncio's loops: one attribute read per call), else in a weak mapping
    (loops that refuse attributes, uvloop's)."""
    share = getattr(loop, "_aioflow_turns", None)
    if share is None:
        share = _shares.get(loop)
        if share is None:
            share = _LoopShare(loop)
            try:
                loop._aioflow_turns = share
            except AttributeError:
                _shares[loop] = share
    return share


class turn:
    """``async with turn():`` around a call's loop-side work: waits, when this iteration
    of the running loop has spent its budget or earlier calls still wait, for a later
    iteration; then times the work. ``already``: seconds of the call's work done just
    before (its arguments' copies), charged with it. (Job calls use the same account
    without the context manager's two coroutines: ``share_of``, ``must_wait``,
    ``wait_turn`` and ``charge``.)"""

    __slots__ = ("_share", "_start", "_already")

    def __init__(self, already: float = 0.0):
        self._already = already

    async def __aenter__(self):
        share = self._share = share_of(asyncio.get_running_loop())
        if share.must_wait():
            await share.wait_turn()
        self._start = time.perf_counter()
        return self

    async def __aexit__(self, *exc):
        self._share.charge(time.perf_counter() - self._start + self._already)
        return False
