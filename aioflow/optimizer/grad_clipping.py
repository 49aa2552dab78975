"""``flow.optimizer.grad_clipping.by_global_norm(clip_norm)``: scale all gradients so that
their joint L2 norm is at most ``clip_norm``."""
from __future__ import annotations

from ..oneflow_ops import math_api as math


class ClipByGlobalNorm:
    def __init__(self, clip_norm: float):
        if not clip_norm > 0:
            raise ValueError(f"by_global_norm: clip_norm must be positive, got {clip_norm!r}")
        self.clip_norm = float(clip_norm)

    def clip(self, grads):
        if not grads:
            return grads
        total = math.add_n([math.reduce_sum(math.square(g)) for g in grads])
        norm = math.sqrt(total)
        scale = self.clip_norm / math.maximum(norm, self.clip_norm)
        return [g * scale for g in grads]

    def __repr__(self) -> str:
        return f"by_global_norm({self.clip_norm})"


def by_global_norm(clip_norm: float) -> ClipByGlobalNorm:
    return ClipByGlobalNorm(clip_norm)
