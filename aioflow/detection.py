"""``flow.detection``: OneFlow v0.3.4's box and polygon transforms of object-detection
pipelines, on tensor buffers of per-image boxes and polygon points.

This module only re-exports; the definitions live in
:mod:`aioflow.oneflow_ops.object_bbox`.
"""

from .oneflow_ops.object_bbox import (
    object_bbox_flip as object_bbox_flip,
    object_bbox_scale as object_bbox_scale,
    object_segmentation_polygon_flip as object_segmentation_polygon_flip,
    object_segmentation_polygon_scale as object_segmentation_polygon_scale,
    object_segmentation_polygon_to_mask as object_segmentation_polygon_to_mask,
)

__all__ = [
    "object_bbox_flip",
    "object_bbox_scale",
    "object_segmentation_polygon_flip",
    "object_segmentation_polygon_scale",
    "object_segmentation_polygon_to_mask",
]
