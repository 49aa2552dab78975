"""``flow.image``: OneFlow v0.3.4's image preprocessing (``Resize``, ``target_resize``,
``CropMirrorNormalize``, ``decode``, ``flip``, ``normalize``, ``batch_align``,
``random_crop``).

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def prep(x: tp.Numpy.Placeholder((1, 4, 6, 3), dtype=flow.uint8)) -> tp.Numpy:
...     return flow.image.CropMirrorNormalize(x, crop_h=2, crop_w=2, mean=[1.0], std=[2.0])
>>> prep(np.full((1, 4, 6, 3), 5, np.uint8)).shape
(1, 3, 2, 2)

This module only re-exports; the definitions live in :mod:`aioflow.oneflow_ops.image_api`.
"""

from .oneflow_ops.image_api import (
    CropMirrorNormalize as CropMirrorNormalize,
    Resize as Resize,
    batch_align as batch_align,
    crop_mirror_normalize as crop_mirror_normalize,
    decode as decode,
    flip as flip,
    normalize as normalize,
    random_crop as random_crop,
    resize as resize,
    target_resize as target_resize,
)

__all__ = [
    "CropMirrorNormalize",
    "Resize",
    "batch_align",
    "crop_mirror_normalize",
    "decode",
    "flip",
    "normalize",
    "random_crop",
    "resize",
    "target_resize",
]
