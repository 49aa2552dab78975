"""Warnings that point at the user's line, once per process.

>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     warn_once("doc-example", "said once"); warn_once("doc-example", "said once")
>>> len(caught)
1
"""
from __future__ import annotations

import warnings

from .callsite import user_stacklevel

__all__ = ["warn_once"]


def warn_once(key: str, message: str, _seen=set()) -> None:  # noqa: B006 - process-wide
    """Warn once per process, pointing at the user's line (the first caller outside
    aioflow and contextlib, so a warning from inside a ``with`` block's manager shows
    the user's ``with`` statement, not contextlib.py)."""
    if key not in _seen:
        _seen.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=user_stacklevel())
