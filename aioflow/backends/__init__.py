"""Backends: where a compiled job's arrays live and its kernels run.

* ``numpy`` (:mod:`.numpy_backend`): the CPU, always available, the default.
* ``cupy`` (:mod:`.cupy.backend`): one CUDA GPU through CuPy (``pip install 'aioflow[cuda]'``).
* ``strict`` (:mod:`.strict`): numpy underneath, but its arrays refuse what CuPy's refuse at
  the host boundary, and reading a device value on the host inside a step fails; the test
  suite runs the GPU's code paths on it where no GPU is at hand.

Which backend a job runs on is decided when it is compiled (:func:`for_job`):

1. an override set by :func:`use` (tests, benchmarks), else
2. the environment variable ``AIOFLOW_DEVICE=cpu|gpu`` (``gpu`` without a usable GPU is an
   error, raised before any compute), else
3. placement: a job with ops under ``flow.scope.placement("gpu", ...)`` runs on the GPU,
   one whose ops are all under ``placement("cpu", ...)`` on the CPU; ops outside any
   placement block follow OneFlow's default, the GPU when one is usable and
   ``flow.config.gpu_device_num`` is above 0. Without a usable GPU, GPU placement runs
   on the CPU (``flow.scope.placement`` warned once, at the user's line).

A whole job runs on one backend. Variables are shared by name across jobs: a job on
another backend than the one holding a variable moves it (once, not at every step).

>>> named("numpy").name, for_job({"cpu"}).name
('numpy', 'numpy')
"""
from __future__ import annotations

import contextlib
import os
import threading

from .base import Backend, BackendUnavailable
from .cupy.backend import probe
from .._core import settings
from .numpy_backend import NumpyBackend
from .cupy.backend import CupyBackend
from .strict import StrictBackend

__all__ = ["Backend", "BackendUnavailable", "named", "gpu_usable", "gpu_unusable_reason",
           "for_job", "device_override", "use", "simulating_gpu", "simulating", "ENV_VAR"]

ENV_VAR = "AIOFLOW_DEVICE"
_lock = threading.Lock()
_instances: dict[str, Backend] = {}
_forced: list[Backend] = []
_simulated_gpus: list[Backend] = []


def named(name: str) -> Backend:
    """The process-wide backend called ``name`` ("numpy", "cupy" or "strict")."""
    with _lock:
        backend = _instances.get(name)
        if backend is None:
            backend = _instances[name] = _construct(name)
        return backend


def _construct(name: str) -> Backend:
    if name == "numpy":
        return NumpyBackend()
    if name == "cupy":
        return CupyBackend()
    if name == "strict":
        return StrictBackend()
    raise ValueError(f"backend: expected 'numpy', 'cupy' or 'strict', got {name!r}")


def gpu_unusable_reason() -> str | None:
    """None when the CuPy backend can run here, else why not."""
    return probe()


def gpu_usable() -> bool:
    return gpu_unusable_reason() is None


@contextlib.contextmanager
def use(backend: "str | Backend"):
    """Compile the jobs of this block for ``backend`` (a name, or a Backend object such as
    a test double), whatever their placement (tests run the same jobs on every backend
    this way). Jobs compiled inside the block keep that backend afterwards.

    >>> with use("numpy"):
    ...     for_job({"gpu"}).name
    'numpy'
    """
    if isinstance(backend, str):
        backend = named(backend)   # fails here, not at the first job, if it cannot run
    _forced.append(backend)
    try:
        yield
    finally:
        _forced.pop()


@contextlib.contextmanager
def simulating_gpu(backend: Backend):
    """Jobs compiled in this block that would run on a GPU run on ``backend`` (a simulated
    GPU, :func:`aioflow.testing.simulated_gpu`), whether or not a real one is usable and
    whatever ``AIOFLOW_DEVICE`` says; ``use()`` still takes precedence."""
    _simulated_gpus.append(backend)
    try:
        yield backend
    finally:
        _simulated_gpus.remove(backend)


def simulating() -> bool:
    """Whether a simulated GPU serves GPU placement now (:func:`simulating_gpu`)."""
    return bool(_simulated_gpus)


def device_override() -> str | None:
    """``$AIOFLOW_DEVICE`` as given (lower case, e.g. "cpu" or "gpu"), or None when unset.

    >>> import os
    >>> os.environ.get(ENV_VAR) is not None or device_override() is None
    True
    """
    return os.environ.get(ENV_VAR, "").strip().lower() or None


def for_job(devices: set[str]) -> Backend:
    """The backend of a job whose ops were placed on ``devices`` ({"cpu", "gpu"}; a node
    outside any placement block says "default")."""
    if _forced:
        return _forced[-1]
    wants_gpu = "gpu" in devices or ("default" in devices and _gpu_by_default())
    if wants_gpu and _simulated_gpus:
        return _simulated_gpus[-1]
    override = device_override()
    if override:
        return _from_override(override)
    if wants_gpu and gpu_usable():
        return named("cupy")
    return named("numpy")


def _from_override(value: str) -> Backend:
    if value == "cpu":
        return named("numpy")
    if value in ("gpu", "cuda"):
        why = gpu_unusable_reason()
        if why is not None:
            raise BackendUnavailable(f"{ENV_VAR}={value} asks for the GPU, but {why}")
        return named("cupy")
    if value == "strict":
        return named("strict")
    raise ValueError(f"{ENV_VAR}: expected 'cpu' or 'gpu', got {value!r}")


def _gpu_by_default() -> bool:
    return settings.get("gpu_device_num") > 0
