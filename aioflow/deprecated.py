"""``flow.deprecated``: OneFlow v0.3.4's deprecated spellings that programs of that era
still use: ``variable_scope`` (now ``flow.scope.namespace``).

This module only re-exports; the definitions live in :mod:`aioflow.scope`.
"""
from .scope import name_scope as variable_scope

__all__ = ["variable_scope"]
