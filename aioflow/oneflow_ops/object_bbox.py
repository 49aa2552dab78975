"""``flow.object_bbox_flip`` and ``flow.object_bbox_scale``: OneFlow's box transforms of
object-detection pipelines.

OneFlow applies them to tensor buffers (one ``(n_i, 4)`` array of boxes per image); these
take one dense ``(batch, n, 4)`` Blob (images with fewer boxes padded), as they were written
before aioflow had tensor buffers (``flow.tensor_buffer_to_tensor`` makes such a Blob). Boxes are ``(xmin, ymin, xmax, ymax)`` in pixels, as OneFlow's kernels read
them; built from elementwise ops, so they differentiate and run on every backend.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def flip(boxes: tp.Numpy.Placeholder((1, 1, 4)),
...          size: tp.Numpy.Placeholder((1, 2), dtype=flow.int32)) -> tp.Numpy:
...     return flow.object_bbox_flip(boxes, size, 1)        # 1: horizontally
>>> flip(np.array([[[10, 20, 30, 40]]], np.float32), np.array([[100, 50]], np.int32)).tolist()
[[[69.0, 20.0, 89.0, 40.0]]]
"""
from __future__ import annotations

import numpy as np

from ..ir import Blob
from .array_ops import gather, stack
from .math_api import floor, mod, multiply
from .ops_api import cast, constant, reshape

__all__ = ["object_bbox_flip", "object_bbox_scale"]


def _check_boxes(op: str, bbox) -> int:
    if not isinstance(bbox, Blob) or bbox.ndim != 3 or bbox.shape[2] != 4 \
            or not bbox.dtype.is_floating:
        raise ValueError(f"{op}: bbox must be a floating-point Blob of shape (batch, boxes, "
                         f"4), got {getattr(bbox, 'shape', bbox)!r}")
    return bbox.shape[0]


def _per_image(op: str, arg: str, blob, batch: int) -> None:
    if not isinstance(blob, Blob) or blob.shape != (batch, 2):
        raise ValueError(f"{op}: {arg} must be a Blob of shape ({batch}, 2), got "
                         f"{getattr(blob, 'shape', blob)!r}")


def _flipped(low, high, extent, flag):
    """(low', high') = (extent - 1 - high, extent - 1 - low) where ``flag`` is 1, else
    (low, high): with ``flag`` exactly 0 or 1 each product is exact, so an unflipped box
    keeps its very values."""
    keep = 1.0 - flag
    return (flag * (extent - 1 - high) + keep * low, flag * (extent - 1 - low) + keep * high)


def object_bbox_flip(bbox, image_size, flip_code, name=None):
    """Flip each image's boxes: ``flip_code`` (an int for all images, or an int8 Blob of
    shape ``(batch,)``) 1 flips horizontally (``x -> width - 1 - x``, swapping xmin and
    xmax), 16 (0x10) vertically, 17 both, 0 neither. ``image_size``: ``(batch, 2)``
    int32 ``(width, height)``."""
    op = "object_bbox_flip"
    batch = _check_boxes(op, bbox)
    _per_image(op, "image_size", image_size, batch)
    if isinstance(flip_code, Blob):
        if flip_code.shape != (batch,):
            raise ValueError(f"{op}: flip_code must be an int or a Blob of shape ({batch},), "
                             f"got shape {flip_code.shape}")
        code = cast(flip_code, bbox.dtype)
    elif isinstance(flip_code, int) and not isinstance(flip_code, bool) \
            and 0 <= flip_code <= 127:
        code = constant(np.full(batch, flip_code), dtype=bbox.dtype)
    else:
        raise ValueError(f"{op}: flip_code must be an int in [0, 127] (0, 1, 16 or 17) or "
                         f"a Blob, got {flip_code!r}")
    horizontal = reshape(mod(code, 2.0), (batch, 1))
    vertical = reshape(mod(floor(code / 16.0), 2.0), (batch, 1))
    size = cast(image_size, bbox.dtype)
    width, height = size[:, 0:1], size[:, 1:2]
    x1, x2 = _flipped(bbox[:, :, 0], bbox[:, :, 2], width, horizontal)
    y1, y2 = _flipped(bbox[:, :, 1], bbox[:, :, 3], height, vertical)
    return stack([x1, y1, x2, y2], axis=-1, name=name)


def object_bbox_scale(bbox, scale, name=None):
    """Scale each image's boxes: x by ``scale[i, 0]``, y by ``scale[i, 1]`` (``scale``: a
    float Blob of shape ``(batch, 2)``, e.g. from resizing the images)."""
    op = "object_bbox_scale"
    batch = _check_boxes(op, bbox)
    _per_image(op, "scale", scale, batch)
    factors = gather(cast(scale, bbox.dtype), constant(np.array([0, 1, 0, 1], np.int32)),
                     axis=1)
    return multiply(bbox, reshape(factors, (batch, 1, 4)), name=name)
