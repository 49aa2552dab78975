"""Deprecated path: ``aioflow.backends.cupy_backend`` moved to
:mod:`aioflow.backends.cupy.backend` (issue 23's layers, docs/architecture.md); this module
re-exports its names and warns when imported."""
import warnings

from aioflow.backends.cupy.backend import *  # noqa: F401,F403

warnings.warn("aioflow.backends.cupy_backend is deprecated: import aioflow.backends.cupy.backend",
              DeprecationWarning, stacklevel=2)
