"""The collectives a rank uses, each a request started on the communication thread
(:mod:`aioflow.distributed.comm`) and waited for with a deadline.

MPI reads and writes host memory: on the CPU backend the step's arrays are passed as
they are; on a device backend (CuPy) the gradients travel through host buffers
(:class:`DeviceBuckets`) and results through the backend's ``to_host``. Sums of
floating-point gradients are divided by the world size on every rank after the
all-reduce (by the world's devices where a rank runs several); with two ranks ``(a + b)
/ 2`` is bitwise the same on both.
"""
from __future__ import annotations

import numpy as np

from . import state


def _comm():
    return state.world().comm


def allreduce_mean_start(arrays, what: str, devices: int = 1):
    """Start averaging ``arrays`` (numpy, one dtype) over the ranks, each the sum over its
    ``devices``; returns a future of the averaged arrays (views of one buffer, shaped like
    the inputs)."""
    from mpi4py import MPI
    size = state.world().size * devices
    send = np.concatenate([np.ravel(a) for a in arrays]) if len(arrays) > 1 else \
        np.array(np.ravel(arrays[0]), copy=True)
    receive = np.empty_like(send)

    def start():
        return _comm().Iallreduce(send, receive, op=MPI.SUM)

    def finish():
        np.divide(receive, receive.dtype.type(size), out=receive)
        return _split_like(receive, [a.shape for a in arrays])

    return state.communicator().submit(start, finish, what)


def _split_like(flat, shapes) -> list:
    """Views of the flat buffer ``flat``, one of each shape in ``shapes``, in order."""
    out, offset = [], 0
    for shape in shapes:
        count = int(np.prod(shape, dtype=np.int64))
        out.append(flat[offset:offset + count].reshape(shape))
        offset += count
    return out


class DeviceBuckets:
    """Gradient all-reduces of a job on a device backend (CuPy; the strict backend in
    tests): MPI reduces host memory, so each bucket's gradients go device -> host buffer
    -> MPI -> host buffer -> device.

    Each bucket keeps its two host buffers (page-locked on a GPU) from step to step:
    allocating pinned memory costs more than the copy. Reusing them is safe in stream
    order: step N's upload from ``receive`` is issued on the compute stream before step
    N+1's download into ``send``, and MPI writes ``receive`` again only after that
    download's event completed."""

    def __init__(self):
        self._buffers: dict = {}

    def start(self, backend, key, arrays, what: str, devices: int = 1):
        """Start averaging ``arrays`` (device arrays of one dtype, produced by the kernels
        issued so far; on each rank the sum over its ``devices``); returns a future of the
        averaged flat host buffer."""
        from mpi4py import MPI
        xp = backend.xp
        total = sum(int(a.size) for a in arrays)
        dtype = np.dtype(arrays[0].dtype)
        buffers = self._buffers.get(key)
        if buffers is None or buffers[0].size != total or buffers[0].dtype != dtype:
            buffers = self._buffers[key] = (backend.host_buffer((total,), dtype),
                                            backend.host_buffer((total,), dtype))
        send, receive = buffers
        flat = xp.concatenate([xp.ravel(a) for a in arrays]) if len(arrays) > 1 else \
            xp.ravel(arrays[0])
        downloaded = backend.copy_to_host_async(flat, send)
        size = state.world().size * devices

        def start():
            if downloaded is not None:
                downloaded.wait()   # on the communication thread; the GIL is released
            return _comm().Iallreduce(send, receive, op=MPI.SUM)

        def finish():
            np.divide(receive, receive.dtype.type(size), out=receive)
            return receive

        return state.communicator().submit(start, finish, what)

    @staticmethod
    def finish(backend, averaged: np.ndarray, specs) -> list:
        """The averaged host buffer back on the device, split into arrays of ``specs``
        ((shape, dtype) pairs)."""
        return _split_like(backend.from_host_async(averaged), [shape for shape, _ in specs])


def allreduce_sum(array, what: str) -> np.ndarray:
    """The sum of every rank's ``array`` (waits for it)."""
    from mpi4py import MPI
    send = np.array(array, order="C")
    receive = np.empty_like(send)
    return state.communicator().run(
        lambda: _comm().Iallreduce(send, receive, op=MPI.SUM), lambda: receive, what)


def allgather_stacked(array, what: str) -> np.ndarray:
    """Every rank's ``array`` (all of one shape), stacked: shape ``(size, *shape)``."""
    send = np.array(array, order="C")
    receive = np.empty((state.world().size,) + send.shape, send.dtype)
    return state.communicator().run(lambda: _comm().Iallgather(send, receive),
                                     lambda: receive, what)


def allgather_object(obj, what: str) -> list:
    """Every rank's picklable ``obj``, in rank order. A non-blocking barrier with the
    deadline first, so that the pickled (blocking) exchange starts only once every rank
    has arrived and cannot hang."""
    comm = _comm()
    return state.communicator().run(lambda: comm.Ibarrier(),
                                    lambda: comm.allgather(obj), what)


def broadcast_arrays(arrays: dict, what: str) -> dict:
    """Rank 0's values of ``arrays`` (name -> numpy array, same names, shapes and dtypes
    on every rank, which :func:`allgather_object` checked first)."""
    names = sorted(arrays)
    layout = [(n, arrays[n].shape, str(arrays[n].dtype)) for n in names]
    layouts = allgather_object(layout, f"{what} (comparing variable layouts)")
    require_same(layouts, f"{what}: the variables to broadcast")
    buffers = [np.array(arrays[n], order="C") for n in names]   # (keeps 0-d arrays 0-d)
    if not buffers:
        return {}
    comm = _comm()
    state.communicator().run(lambda: [comm.Ibcast(b, root=0) for b in buffers],
                             lambda: None, what)
    return dict(zip(names, buffers))


def require_same(values: list, what: str) -> None:
    """Raise on every rank (all got the same list) when a rank's value differs from
    rank 0's, naming the ranks and both values."""
    differing = [r for r, v in enumerate(values) if v != values[0]]
    if differing:
        first = differing[0]
        raise ValueError(
            f"{what} differ between ranks: rank 0 has {values[0]!r}, rank {first} has "
            f"{values[first]!r} (ranks differing from rank 0: {differing}). Every rank "
            "must run the same script with the same job definitions")
