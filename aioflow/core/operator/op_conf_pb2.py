"""OneFlow's ``op_conf.proto``, the part v0.3 scripts read: the ``ActivationType`` enum
(BERT's ``act_fn = op_conf_util.kNone``). OneFlow's operator messages describe its C++
ops; aioflow builds its graph from Python calls and offers none of them."""
from .._enum import Enum

ActivationType = Enum("ActivationType", {"kNone": 0, "kTanH": 1, "kSigmoid": 2, "kRelu": 3})
globals().update(ActivationType.items())
__all__ = ["ActivationType", *ActivationType.keys()]
