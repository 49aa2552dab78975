"""``flow.system``: OneFlow's system-level ops; here ``flow.system.assign``."""
from .assign_api import system_assign as assign

__all__ = ["assign"]
