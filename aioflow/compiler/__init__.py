"""From a traced graph to an executable plan: autodiff, passes, plan building.

:func:`compile` is the one entry point a job uses; the pieces are public for tests.
"""
from .autodiff import gradients
from .compile import compile  # noqa: A004 - the compiler's verb
from .passes import eliminate_dead_code, verify
from .plan import Plan, build_plan

__all__ = ["compile", "gradients", "eliminate_dead_code", "verify", "Plan", "build_plan"]
