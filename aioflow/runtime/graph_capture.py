"""Deprecated path: ``aioflow.runtime.graph_capture`` moved to
:mod:`aioflow.backends.graph_capture` (issue 23's layers, docs/architecture.md); this module
re-exports its names and warns when imported."""
import warnings

from aioflow.backends.graph_capture import *  # noqa: F401,F403

warnings.warn("aioflow.runtime.graph_capture is deprecated: import aioflow.backends.graph_capture",
              DeprecationWarning, stacklevel=2)
