"""Deprecated path: ``aioflow.runtime.device`` moved to
:mod:`aioflow.backends.device` (issue 23's layers, docs/architecture.md); this module
re-exports its names and warns when imported."""
import warnings

from aioflow.backends.device import *  # noqa: F401,F403

warnings.warn("aioflow.runtime.device is deprecated: import aioflow.backends.device",
              DeprecationWarning, stacklevel=2)
