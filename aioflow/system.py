"""``flow.system``: OneFlow's system-level ops; here ``flow.system.assign``."""
from .oneflow_ops.assign_api import system_assign as assign

__all__ = ["assign"]
