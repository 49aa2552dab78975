"""How error messages name a value the user passed: its kind and shape, not its contents.

>>> import numpy as np
>>> describe(np.zeros((2, 3), np.float32)), describe([1, 2]), describe(None)
('float32 array of shape (2, 3)', 'list of length 2', 'NoneType')
"""
from __future__ import annotations

import numpy as np

__all__ = ["describe"]


def describe(value) -> str:
    """``"float32 array of shape (2, 3)"``, ``"list of length 2"``, or the type's name."""
    if isinstance(value, np.ndarray):
        return f"{value.dtype} array of shape {value.shape}"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__} of length {len(value)}"
    return type(value).__name__
