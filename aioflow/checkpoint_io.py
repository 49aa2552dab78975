"""The old path of :mod:`aioflow.checkpoint.io`, kept because docs/api/checkpoint.md
documented ``aioflow.checkpoint_io`` before the checkpoint modules became a package.

Importing it gives the very same module object (not a copy), so its functions, error
classes and module state are those of :mod:`aioflow.checkpoint.io`.
"""
import sys

from .checkpoint import io as _io

sys.modules[__name__] = _io
