"""``flow.linalg``: OneFlow's ``linalg.matmul`` is ``flow.matmul``."""
from .oneflow_ops.ops_api import matmul

__all__ = ["matmul"]
