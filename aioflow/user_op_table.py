"""The old path of :mod:`aioflow.oneflow_ops.user_op_table`, kept because docs/api/flow.md
documented ``aioflow.user_op_table.USER_OPS`` before that module moved into
:mod:`aioflow.oneflow_ops`.

Importing it gives the very same module object (not a copy), so ``USER_OPS`` is the table
``flow.user_op_builder`` builds from.
"""
import sys

from .oneflow_ops import user_op_table as _table

sys.modules[__name__] = _table
