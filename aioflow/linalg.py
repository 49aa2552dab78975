"""``flow.linalg``: OneFlow's ``linalg.matmul`` is ``flow.matmul``."""
from .ops_api import matmul

__all__ = ["matmul"]
