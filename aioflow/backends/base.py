"""What every backend offers: the one small interface between aioflow and an array library.

A backend is where a compiled job's arrays live and its kernels run. The compiler asks it
for nothing but a name (to pick each op's kernel from the registry); a step asks it for
its array module ``xp``, its random generators and its :attr:`device` (the stage / launch
/ fetch / event contract of :mod:`aioflow.backends.device`); variables and optimizer state
are placed on it with :meth:`to_device` and come back to the host with :meth:`to_host`
(checkpoints, ``get_all_variables``, ``watch``).

The host side of aioflow (arguments, checkpoints, initializers) is numpy everywhere, so a
checkpoint saved from one backend loads bit-exactly in any other.
"""
from __future__ import annotations

from typing import Any

import numpy as np


class BackendUnavailable(RuntimeError):
    """The backend asked for cannot run on this machine (no CuPy, no CUDA device)."""


class Backend:
    """Base class. Subclasses set :attr:`name`, :attr:`device_tag`, :attr:`xp` and
    :attr:`device` and override the transfers where the arrays are not numpy's."""

    name: str = "?"            # the key of kernels in the op registry ("numpy", "cupy", ...)
    device_tag: str = "cpu"    # OneFlow's device tag this backend serves ("cpu" or "gpu")
    xp: Any = np               # the array module kernels are written against
    device: Any = None         # runtime.device interface: stage, launch, fetch
    # Kernels may split their batch over CPU worker threads (kernels/parallel.py): only
    # where the arrays are host memory and the BLAS is a CPU library.
    splits_on_host_threads: bool = False
    # Steps are bound by kernel launches (a GPU): the compiler merges ops into fewer,
    # larger ones (compiler/launch_fusion.py) unless flow.config.launch_fusion says no.
    fuses_launches: bool = False

    @property
    def kernel_set(self) -> str:
        """Whose kernels the compiler picks from the op registry: the backend's own name,
        unless it runs another backend's kernels (the simulated GPU runs numpy's)."""
        return self.name

    def to_device(self, host_array: np.ndarray):
        """A device copy of a host (numpy) array."""
        return self.xp.array(host_array, copy=True)

    def to_host(self, array) -> np.ndarray:
        """A host (numpy) copy of a device array of this backend."""
        return np.array(array, copy=True)

    def assign(self, target, host_array: np.ndarray) -> None:
        """Overwrite the device array ``target`` with a host array of its shape."""
        target[...] = self.to_device(np.asarray(host_array, dtype=target.dtype))

    def owns(self, array) -> bool:
        """Whether ``array`` lives on this backend (so a variable need not move)."""
        return isinstance(array, np.ndarray)

    def host_buffer(self, shape, dtype) -> np.ndarray:
        """A host array that device copies can use asynchronously (page-locked on a GPU);
        meant to be kept and reused: allocating it costs more than one copy."""
        return np.empty(shape, dtype)

    def copy_to_host_async(self, array, out: np.ndarray):
        """Start copying device ``array`` into ``out`` (a :meth:`host_buffer` of its size)
        after the work issued so far; returns an event to ``wait()`` for before reading
        ``out``, or None when the copy is already done (host backends)."""
        out[...] = np.reshape(self.to_host(array), out.shape)
        return None

    def from_host_async(self, host_array: np.ndarray):
        """A device array holding ``host_array``, copied in stream order with the work
        issued after it; ``host_array`` must stay unchanged until that work is done."""
        return self.to_device(host_array)

    def random_generator(self, seed):
        """A generator of random bits on the device (``random(shape, dtype=)``)."""
        return np.random.default_rng(seed)

    def graph_capturer(self):
        """The object that captures and replays a compiled step as one graph
        (:mod:`aioflow.backends.graph_capture`), or None where steps run eagerly."""
        return None

    def synchronize(self) -> None:
        """Wait until all work issued on this backend has finished."""

    def memory_in_use(self) -> int:
        """Bytes the backend's memory pool holds for live arrays (0 where not tracked)."""
        return 0

    def __repr__(self) -> str:
        return f"<aioflow backend {self.name} ({self.device_tag})>"
