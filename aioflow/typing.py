"""``aioflow.typing`` (``import aioflow.typing as tp``): the annotations of job functions.

Re-exports only; they are defined in :mod:`aioflow.engine.annotations`, which says what
each means.
"""
from .engine.annotations import (Bundle as Bundle, Callback as Callback, Dict as Dict,
                                 ListListNumpy as ListListNumpy, ListNumpy as ListNumpy,
                                 Numpy as Numpy, PlaceholderSpec as PlaceholderSpec)

__all__ = ["Numpy", "ListNumpy", "ListListNumpy", "Dict", "Bundle", "Callback",
           "PlaceholderSpec"]
