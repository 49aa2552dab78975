"""``flow.detection``: OneFlow's box and polygon transforms of object-detection pipelines
(``object_bbox_flip``, ``object_bbox_scale``, ``object_segmentation_polygon_flip``,
``object_segmentation_polygon_scale``, ``object_segmentation_polygon_to_mask``; also
top-level names of ``flow``).

As in OneFlow they take tensor buffers: one ``(n_i, 4)`` array of boxes, or ``(n_i, 2)``
polygon points, per image (host kernels in :mod:`aioflow.ops.image_ops`). The box
transforms also take one dense ``(batch, n, 4)`` Blob (images with fewer boxes padded):
built from elementwise ops, that form differentiates and runs on every backend. Boxes are
``(xmin, ymin, xmax, ymax)`` in pixels, as OneFlow's kernels read them.

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

from .._core import dtypes
from ..ir import Blob
from ..ops import image_ops as _ops
from .array_ops import gather, stack
from .image_api import _flip_code
from .math_api import floor, mod, multiply
from .ops_api import cast, constant, reshape

__all__ = ["object_bbox_flip", "object_bbox_scale", "object_segmentation_polygon_flip",
           "object_segmentation_polygon_scale", "object_segmentation_polygon_to_mask"]


def _is_buffer(blob) -> bool:
    return isinstance(blob, Blob) and blob.dtype is dtypes.tensor_buffer


def _buffer_and_rows(op: str, arg: str, buffer, per_image, per_image_arg: str) -> None:
    """A 1-d tensor buffer and its dense per-image ``(batch, 2)`` companion."""
    if buffer.ndim != 1:
        raise ValueError(f"{op}: {arg} must be a tensor buffer of shape (batch,), got "
                         f"{buffer.shape}")
    _per_image(op, per_image_arg, per_image, buffer.shape[0])


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
    int32 ``(width, height)``. ``bbox``: a tensor buffer (a result of the same kind), or
    a dense ``(batch, boxes, 4)`` Blob."""
    op = "object_bbox_flip"
    if _is_buffer(bbox):
        _buffer_and_rows(op, "bbox", bbox, image_size, "image_size")
        extra, attrs = _flip_code(op, flip_code, bbox.shape[0])
        return _ops.object_bbox_flip_op(bbox, image_size, *extra, **attrs, name=name)
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
    float Blob of shape ``(batch, 2)``, e.g. from resizing the images). ``bbox``: a tensor
    buffer (a result of the same kind), or a dense ``(batch, boxes, 4)`` Blob."""
    op = "object_bbox_scale"
    if _is_buffer(bbox):
        _buffer_and_rows(op, "bbox", bbox, scale, "scale")
        return _ops.object_bbox_scale_op(bbox, scale, name=name)
    batch = _check_boxes(op, bbox)
    _per_image(op, "scale", scale, batch)
    factors = gather(cast(scale, bbox.dtype), constant(np.array([0, 1, 0, 1], np.int32)),
                     axis=1)
    return multiply(bbox, reshape(factors, (batch, 1, 4)), name=name)


def _require_points(op: str, poly) -> None:
    if not _is_buffer(poly):
        raise TypeError(f"{op}: poly must be a tensor buffer of (points, 2) arrays "
                        f"(flow.tensor_list_to_tensor_buffer's), got "
                        f"{getattr(poly, 'dtype', type(poly).__name__)}")


def object_segmentation_polygon_flip(poly, image_size, flip_code, name=None):
    """Flip each image's polygon points (a tensor buffer of ``(n, 2)`` float arrays):
    ``flip_code`` 1 maps ``x -> width - x``, 16 ``y -> height - y``, 17 both (OneFlow's
    kernel: no ``- 1``, unlike the boxes); ``image_size``: ``(batch, 2)`` int32 (w, h)."""
    op = "object_segmentation_polygon_flip"
    _require_points(op, poly)
    _buffer_and_rows(op, "poly", poly, image_size, "image_size")
    extra, attrs = _flip_code(op, flip_code, poly.shape[0])
    return _ops.object_segmentation_polygon_flip_op(poly, image_size, *extra, **attrs,
                                                    name=name)


def object_segmentation_polygon_scale(poly, scale, name=None):
    """Scale each image's polygon points: x by ``scale[i, 0]``, y by ``scale[i, 1]``."""
    op = "object_segmentation_polygon_scale"
    _require_points(op, poly)
    _buffer_and_rows(op, "poly", poly, scale, "scale")
    return _ops.object_segmentation_polygon_scale_op(poly, scale, name=name)


def object_segmentation_polygon_to_mask(poly, poly_index, image_size, name=None):
    """Each image's objects as int8 masks ``(objects, height, width)`` (a tensor buffer):
    ``poly`` holds the points, ``poly_index`` (a tensor buffer of ``(n, 3)`` int arrays)
    each point's (point, polygon, object) numbers, counted from 0 in order; each object's
    polygons are filled at the rounded points (OpenCV's ``fillPoly``, as OneFlow)."""
    op = "object_segmentation_polygon_to_mask"
    _require_points(op, poly)
    _require_points(op, poly_index)
    _buffer_and_rows(op, "poly", poly, image_size, "image_size")
    if poly_index.shape != poly.shape:
        raise ValueError(f"{op}: poly_index must have poly's shape {poly.shape}, got "
                         f"{poly_index.shape}")
    return _ops.object_segmentation_polygon_to_mask_op(poly, poly_index, image_size,
                                                       name=name)
