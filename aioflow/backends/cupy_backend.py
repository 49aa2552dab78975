"""The GPU backend: CuPy arrays on one CUDA device, cuBLAS matrix products, CuPy kernels.

Everything a session does on the device (transfers, kernels, variable updates) is issued on
one stream of the backend's own, so stream order alone keeps a step after the copies that
feed it and a checkpoint after the step that produced its values; the host waits only on
the events of :mod:`aioflow.runtime.device` (``Event.synchronize()`` releases the GIL).

``import cupy`` succeeds on machines without a GPU, and a CuPy ``Stream`` built there
raises (and raises again in its ``__del__``): :func:`probe` asks ``cupy.is_available()``
before anything is constructed.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Sequence

import numpy as np

from ..runtime.device import Event, Fetched, Launched, Staged
from .base import Backend, BackendUnavailable

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


class CupyDevice:
    """stage / launch / fetch on one CUDA stream (runtime/device.py's contract)."""

    name = "gpu"

    def __init__(self, stream):
        import cupy
        self.xp = cupy
        self.stream = stream

    def stage(self, host_arrays: Sequence) -> Staged:
        cupy = self.xp
        arrays = []
        with self.stream:
            for host in host_arrays:
                device_array = cupy.empty(host.shape, host.dtype)
                device_array.set(host, stream=self.stream)
                arrays.append(device_array)
        return Staged(arrays, CupyEvent(self.stream), keep_alive=list(host_arrays))

    def launch(self, fn: Callable[[list], list], staged: Staged) -> Launched:
        with self.stream:
            outputs = fn(staged.arrays)
        return Launched(outputs, CupyEvent(self.stream))

    def fetch(self, launched: Launched) -> Fetched:
        import cupyx
        arrays = []
        for output in launched.outputs:
            host = cupyx.empty_pinned(output.shape, output.dtype)
            output.get(stream=self.stream, out=host)
            arrays.append(host)
        return Fetched(arrays, CupyEvent(self.stream))

    def __repr__(self) -> str:
        return f"<CupyDevice cuda:{self.xp.cuda.Device().id}>"


class CupyBackend(Backend):
    """CuPy on CUDA device ``device_id``. Construct through :func:`aioflow.backends.named`
    (which probes first); constructing it without a usable GPU raises
    :class:`BackendUnavailable`."""

    name = "cupy"
    device_tag = "gpu"

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

    def random_generator(self, seed):
        return self.xp.random.default_rng(seed)

    def synchronize(self) -> None:
        self.stream.synchronize()

    def memory_in_use(self) -> int:
        return int(self.xp.get_default_memory_pool().used_bytes())

    def __repr__(self) -> str:
        return f"<aioflow backend cupy (gpu {self.device_id})>"
