"""An uncaught error on one rank stops every rank at once.

Without this, a rank that raises exits, and the others wait in their next collective
until its deadline. Here the error's traceback is printed with the rank (and the last
step that rank started), then ``MPI.COMM_WORLD.Abort`` asks the launcher to stop all.
"""
from __future__ import annotations

import sys
import threading


def install(world) -> None:
    previous = sys.excepthook

    def abort_on_error(exc_type, exc, tb):
        if exc_type is SystemExit and exc.code in (None, 0):
            return previous(exc_type, exc, tb)
        print(f"aioflow rank {world.rank} of {world.size}: uncaught "
              f"{exc_type.__name__}; aborting every rank", file=sys.stderr, flush=True)
        previous(exc_type, exc, tb)
        sys.stderr.flush()
        world.comm.Abort(1)

    sys.excepthook = abort_on_error

    previous_thread_hook = threading.excepthook

    def abort_on_thread_error(args):
        previous_thread_hook(args)
        if args.exc_type is not SystemExit:
            print(f"aioflow rank {world.rank} of {world.size}: uncaught "
                  f"{args.exc_type.__name__} in thread {args.thread.name!r}; aborting every "
                  "rank", file=sys.stderr, flush=True)
            world.comm.Abort(1)

    threading.excepthook = abort_on_thread_error
