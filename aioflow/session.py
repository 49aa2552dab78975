"""``flow.session``: the default session, for tests and tools that reach into it.

Re-exports only; the session lives in :mod:`aioflow.engine.session` (docs/architecture.md).
"""
from .engine.session import (Session as Session, clear_default_session as clear_default_session,
                             default_session as default_session)

__all__ = ["Session", "clear_default_session", "default_session"]
