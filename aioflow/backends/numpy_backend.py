"""The CPU backend: numpy arrays, OpenBLAS matrix products, aioflow's own CPU kernels.

Its device does everything at once (:class:`aioflow.backends.device.HostDevice`): a step's
inputs are used where they are and its events are born complete.
"""
from __future__ import annotations

import numpy as np

from .device import HostDevice
from .base import Backend


class NumpyBackend(Backend):
    """numpy on the CPU, always available.

    >>> backend = NumpyBackend()
    >>> backend.to_host(backend.to_device(np.arange(3))).tolist()
    [0, 1, 2]
    """

    name = "numpy"
    device_tag = "cpu"
    xp = np
    splits_on_host_threads = True

    def __init__(self):
        self.device = HostDevice()

    def assign(self, target, host_array) -> None:
        target[...] = host_array
