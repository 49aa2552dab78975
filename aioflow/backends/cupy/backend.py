"""The GPU backend: CuPy arrays on one CUDA device, cuBLAS matrix products, CuPy kernels.

A session's kernels, variable updates and host transfers of variables are issued on one
compute stream of the backend's own, so stream order keeps a step after the step before it
and a checkpoint after the step that produced its values. A step's input and output
copies run on two copy streams, ordered against the compute stream by events
(:class:`CupyDevice`), so they overlap other steps' kernels; the host waits only on the
events of :mod:`aioflow.backends.device` (``Event.synchronize()`` releases the GIL), on
the runtime's completion thread.

``import cupy`` succeeds on machines without a GPU, and a CuPy ``Stream`` built there
raises (and raises again in its ``__del__``): :func:`probe` asks ``cupy.is_available()``
before anything is constructed.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Sequence

import numpy as np

from ..device import Event, Fetched, Launched, RingStaged, Staged, StagingRing
from ..base import Backend, BackendUnavailable
from . import capture_gemm
from . import fused_kernels, kernels  # noqa: F401 - importing them registers the CuPy kernels

_probe_lock = threading.Lock()
_probed: dict = {}


def probe() -> str | None:
    """None when CuPy can run on a CUDA device here, else why it cannot (one line)."""
    with _probe_lock:
        if "why" not in _probed:
            _probed["why"] = _why_unusable()
        return _probed["why"]


def _why_unusable() -> str | None:
    try:
        import cupy
    except ImportError as exc:
        return f"CuPy is not installed (pip install 'aioflow[cuda]'): {exc}"
    except Exception as exc:  # noqa: BLE001 - a broken CUDA install fails in odd ways
        return f"CuPy failed to import: {type(exc).__name__}: {exc}"
    try:
        if not cupy.is_available():
            return "CuPy finds no usable CUDA device (cupy.is_available() is False)"
    except Exception as exc:  # noqa: BLE001
        return f"CuPy cannot reach a CUDA device: {type(exc).__name__}: {exc}"
    return None


class CupyEvent(Event):
    """A CUDA event recorded on the backend's stream."""

    __slots__ = ("_event",)

    def __init__(self, stream):
        import cupy
        self._event = cupy.cuda.Event(block=True, disable_timing=True)
        self._event.record(stream)

    @property
    def cuda_event(self):
        """The ``cupy.cuda.Event``, for other streams to wait on."""
        return self._event

    def done(self) -> bool:
        return self._event.done

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is None:
            self._event.synchronize()   # releases the GIL while it waits
            return True
        deadline = time.monotonic() + timeout
        while not self._event.done:
            if time.monotonic() >= deadline:
                return False
            time.sleep(50e-6)
        return True


def _empty_pinned(shape, dtype) -> np.ndarray:
    """A numpy array in page-locked memory: copies from it run on a copy engine,
    asynchronously; allocating it per step would cost more than the copy."""
    import cupyx
    return cupyx.empty_pinned(shape, dtype)


def _on_host(array) -> bool:
    """A value that stays on the host in a GPU step: a tensor buffer or tensor list (a
    numpy object array of arrays, ``ops/tensor_buffer.py``), or host-resident state."""
    return isinstance(array, np.ndarray)


class _PinnedFetched(Fetched):
    """Outputs copied into pinned buffers; :meth:`take` copies them out and gives the
    buffers back. Holds the device outputs until then (their memory must not be reused
    while the copy reads it). Outputs that live on the host are copied as they are."""

    def __init__(self, arrays, event, device_outputs, ring: StagingRing):
        super().__init__(arrays, event)
        self._device_outputs = device_outputs
        self._ring = ring

    def take(self) -> list:
        host = [np.array(buffer, copy=True) for buffer in self.arrays]
        self._ring.give_back([buffer for buffer, output in zip(self.arrays,
                              self._device_outputs) if not _on_host(output)])
        self.arrays, self._device_outputs = host, None
        return host


class CupyDevice:
    """stage / launch / fetch (backends/device.py's contract) on three CUDA streams.

    * ``copy_in``: a step's inputs go host -> pinned buffer (a memcpy on the calling
      thread) -> device, asynchronously; the device arrays are allocated on this stream,
      so CuPy's stream-ordered pool never hands their memory to the compute stream while
      the copy may still write it;
    * ``stream`` (compute): waits for the copy's event, then runs the step's kernels; the
      backend's variables live here, in stream order from step to step;
    * ``copy_out``: waits for the compute event, then copies the outputs into pinned
      buffers.

    So step N+1's copies run while step N computes, and step N-1's outputs come back
    meanwhile. Staged inputs and device outputs are referenced until the step completes
    (``InFlight.result``), after every stream that reads them finished.
    """

    name = "gpu"

    def __init__(self, stream):
        import cupy
        self.xp = cupy
        self.stream = stream
        self.copy_in = cupy.cuda.Stream(non_blocking=True)
        self.copy_out = cupy.cuda.Stream(non_blocking=True)
        self.ring = StagingRing(_empty_pinned)
        # A list to record (start, end) CUDA timing events around each step's kernels in
        # (benchmarks/pipeline_depth.py), or None: timing events cost a little.
        self.timings: list | None = None

    def stage(self, host_arrays: Sequence) -> Staged:
        cupy = self.xp
        buffers, arrays = [], []
        with self.copy_in:
            for host in host_arrays:
                if host.dtype == object:    # a tensor buffer: its kernels read it on the host
                    arrays.append(host)
                    continue
                buffer = self.ring.claim(host)    # copied at the call, or now
                device_array = cupy.empty(host.shape, host.dtype)
                device_array.set(buffer, stream=self.copy_in)
                buffers.append(buffer)
                arrays.append(device_array)
        return RingStaged(arrays, CupyEvent(self.copy_in), buffers, self.ring)

    def private_copy(self, value: np.ndarray) -> np.ndarray:
        """A call's argument copied now, straight into a pinned staging buffer."""
        if value.dtype == object:
            return np.array(value, copy=True)
        return self.ring.lend_copy(value)

    def launch(self, fn: Callable[[list], list], staged: Staged) -> Launched:
        if isinstance(staged.event, CupyEvent):
            self.stream.wait_event(staged.event.cuda_event)
        timings = self.timings
        if timings is not None:
            start = self.xp.cuda.Event()
            start.record(self.stream)
        with self.stream:
            outputs = fn(staged.arrays)
        if timings is not None:
            end = self.xp.cuda.Event()
            end.record(self.stream)
            timings.append((start, end))
        return Launched(outputs, CupyEvent(self.stream))

    def elapsed_ms(self, start, end) -> float:
        """Milliseconds between two recorded timing events (waits for ``end``)."""
        end.synchronize()
        return self.xp.cuda.get_elapsed_time(start, end)

    def fetch(self, launched: Launched) -> Fetched:
        self.copy_out.wait_event(launched.event.cuda_event)
        buffers = []
        for output in launched.outputs:
            if _on_host(output):
                buffers.append(output)
                continue
            buffer = self.ring.take(output.shape, output.dtype)
            output.get(stream=self.copy_out, out=buffer)
            buffers.append(buffer)
        return _PinnedFetched(buffers, CupyEvent(self.copy_out), launched.outputs, self.ring)

    def __repr__(self) -> str:
        return f"<CupyDevice cuda:{self.xp.cuda.Device().id}>"


class CupyGraph:
    """A captured step: the instantiated CUDA graph, and the fixed arrays its capture
    produced (the step's outputs and slots, which every replay overwrites)."""

    def __init__(self, graph, outputs, slots):
        self.graph = graph
        self.outputs = outputs
        self.slots = slots


class CupyGraphCapturer:
    """CUDA stream capture of a compiled step (backends/graph_capture.py), on a private
    memory pool (verified on an H200, issue 26).

    * Memory: the warm-up step and the capture allocate from a pool of their own
      (``cupy.cuda.MemoryPool`` through ``using_allocator``), so the capture finds the
      blocks the warm-up freed and calls no ``cudaMalloc`` while capturing, and no other
      work of the process is handed the graph's memory afterwards.
    * cuBLAS: CuPy 14 refuses every cuBLAS call during a capture (its bindings first set
      the handle's stream, and that raises); cuBLAS itself supports capture. So products
      go to cuBLAS through ``ctypes`` while capturing (:mod:`.capture_gemm`), on
      CuPy's handle, its stream set before the capture begins. Any other library call CuPy
      refuses fails the capture, and the job runs eagerly with one warning naming it.
    """

    def __init__(self, stream):
        import cupy
        self._cupy = cupy
        self.stream = stream
        self.pool = cupy.cuda.MemoryPool()

    def allocation(self):
        return self._cupy.cuda.using_allocator(self.pool.malloc)

    def capture(self, step, ops) -> CupyGraph:
        cupy = self._cupy
        handle = cupy.cuda.device.get_cublas_handle()   # before capturing: it may allocate
        with self.allocation(), self.stream, capture_gemm.capturing(handle, self.stream):
            self.stream.begin_capture()
            try:
                outputs, slots = step()
            finally:
                graph = self.stream.end_capture()
        return CupyGraph(graph, outputs, slots)

    def launch(self, captured: CupyGraph) -> None:
        captured.graph.launch(stream=self.stream)


class CupyBackend(Backend):
    """CuPy on CUDA device ``device_id``. Construct through :func:`aioflow.backends.named`
    (which probes first); constructing it without a usable GPU raises
    :class:`BackendUnavailable`."""

    name = "cupy"
    device_tag = "gpu"
    fuses_launches = True

    def __init__(self, device_id: int = 0):
        why = probe()
        if why is not None:
            raise BackendUnavailable(why)
        import cupy
        self.xp = cupy
        self.device_id = device_id
        with cupy.cuda.Device(device_id):
            self.stream = cupy.cuda.Stream(non_blocking=True)
        self.device = CupyDevice(self.stream)
        self._capturer = None

    def to_device(self, host_array):
        with self.stream:
            out = self.xp.array(host_array, copy=True)
        self.stream.synchronize()   # the host array may be reused as soon as we return
        return out

    def to_host(self, array) -> np.ndarray:
        if isinstance(array, np.ndarray):   # host-resident state (step counters)
            return array.copy()
        return array.get(stream=self.stream)   # waits for the copy: a pageable target

    def assign(self, target, host_array) -> None:
        if isinstance(target, np.ndarray):
            target[...] = host_array
            return
        host = np.array(host_array, dtype=target.dtype, order="C")   # 0-d stays 0-d
        target.set(host, stream=self.stream)
        self.stream.synchronize()

    def owns(self, array) -> bool:
        return isinstance(array, self.xp.ndarray)

    def host_buffer(self, shape, dtype) -> np.ndarray:
        return _empty_pinned(shape, dtype)   # copies from and to it run asynchronously

    def copy_to_host_async(self, array, out: np.ndarray) -> CupyEvent:
        """Called inside a step (the compute stream current): ordered after its kernels."""
        self.xp.ascontiguousarray(array).reshape(out.shape).get(stream=self.stream, out=out)
        return CupyEvent(self.stream)

    def from_host_async(self, host_array: np.ndarray):
        device_array = self.xp.empty(host_array.shape, host_array.dtype)
        device_array.set(host_array, stream=self.stream)
        return device_array

    def random_generator(self, seed):
        return self.xp.random.default_rng(seed)

    def graph_capturer(self):
        if self._capturer is None:
            self._capturer = CupyGraphCapturer(self.stream)
        return self._capturer

    def synchronize(self) -> None:
        self.stream.synchronize()

    def memory_in_use(self) -> int:
        return int(self.xp.get_default_memory_pool().used_bytes())

    def __repr__(self) -> str:
        return f"<aioflow backend cupy (gpu {self.device_id})>"
