"""A COCO annotation file read as OneFlow's COCO reader reads it (``user/data/coco_data_reader.h``),
with the standard library's ``json`` (no pycocotools).

* images are those of ``"images"``, less those without a valid annotation (none, or every
  box at most 1 pixel wide or high; for keypoint annotations, fewer than 10 visible
  keypoints), in ascending id order;
* crowd annotations (``iscrowd`` 1) are ignored; every polygon needs more than 6
  coordinates;
* category ids become contiguous labels 1..K in ascending id order;
* boxes go from COCO's ``[left, top, width, height]`` to ``[x1, y1, x2, y2]`` with
  ``x2 = left + max(width - 1, 0)``, clipped to ``[0, width_of_image - 1]`` (y alike), in
  float32; boxes left empty by the clipping are dropped (their labels are not: OneFlow's
  reader does the same, so ``gt_label`` may be longer than ``gt_bbox``);
* segmentations: every point ``(x, y)`` of every polygon of the image's annotations in
  order, float32 ``(points, 2)``, and per point int32 ``(point index in its polygon,
  polygon index in its annotation, annotation index in the image)``.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np

__all__ = ["CocoImage", "CocoIndex", "load_index"]

_MIN_VISIBLE_KEYPOINTS = 10   # OneFlow's kMinKeypointsPerImage


@dataclass
class CocoImage:
    """One image of the data set and its (non-crowd) annotations."""

    id: int
    file_name: str
    height: int
    width: int
    annotations: list = field(default_factory=list)

    @property
    def group(self) -> int:
        """OneFlow's aspect-ratio group: height // width (0 for landscape images)."""
        return self.height // self.width


@dataclass
class CocoIndex:
    images: list            # CocoImage, ascending id
    labels: dict            # category id -> contiguous label 1..K
    path: str

    def bboxes(self, image: CocoImage) -> np.ndarray:
        boxes = []
        one, zero = np.float32(1), np.float32(0)
        right_edge, bottom_edge = np.float32(image.width) - one, np.float32(image.height) - one
        for anno in image.annotations:
            left, top, width, height = (np.float32(v) for v in anno["bbox"])
            right = left + max(width - one, zero)
            bottom = top + max(height - one, zero)
            left, right = (min(max(v, zero), right_edge) for v in (left, right))
            top, bottom = (min(max(v, zero), bottom_edge) for v in (top, bottom))
            if right > left and bottom > top:
                boxes.append((left, top, right, bottom))
        return np.array(boxes, dtype=np.float32).reshape(-1, 4)

    def labels_of(self, image: CocoImage) -> np.ndarray:
        return np.array([self.labels[a["category_id"]] for a in image.annotations],
                        dtype=np.int32)

    def segmentation(self, image: CocoImage) -> tuple[np.ndarray, np.ndarray]:
        points, index = [], []
        for segm_index, anno in enumerate(image.annotations):
            for poly_index, polygon in enumerate(anno["segmentation"]):
                pairs = np.asarray(polygon, dtype=np.float32).reshape(-1, 2)
                points.append(pairs)
                index += [(i, poly_index, segm_index) for i in range(len(pairs))]
        points = np.concatenate(points) if points else np.zeros((0, 2), np.float32)
        return points, np.array(index, dtype=np.int32).reshape(-1, 3)


def load_index(annotation_file: str, image_dir: str, what: str) -> CocoIndex:
    """The images and labels of ``annotation_file``; FileNotFoundError or ValueError name
    the file and the faulty entry."""
    if not os.path.isfile(annotation_file):
        raise FileNotFoundError(f"{what}: no annotation file {annotation_file!r}")
    if not os.path.isdir(image_dir):
        raise FileNotFoundError(f"{what}: no image folder {image_dir!r}")
    try:
        with open(annotation_file, encoding="utf-8") as f:
            data = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        # RecursionError: arrays nested deeper than the parser's stack (a hostile file)
        raise ValueError(f"{what}: {annotation_file} is not JSON: "
                         f"{exc if not isinstance(exc, RecursionError) else 'nested too deep'}"
                         ) from None
    where = f"{what}: {annotation_file}"
    images = {}
    for entry in _list(data, "images", where):
        image = CocoImage(_int(entry, "id", where), _str(entry, "file_name", where),
                          _int(entry, "height", where), _int(entry, "width", where))
        if image.id in images:
            raise ValueError(f"{where}: image id {image.id} appears twice")
        if image.height <= 0 or image.width <= 0:
            raise ValueError(f"{where}: image {image.id} has size {image.height}x{image.width}")
        images[image.id] = image
    labels = {cat_id: label for label, cat_id in enumerate(
        sorted(_int(c, "id", where) for c in _list(data, "categories", where)), start=1)}
    for anno in _list(data, "annotations", where):
        _add_annotation(anno, images, labels, where)
    kept = [images[i] for i in sorted(images) if _has_valid_annotations(images[i])]
    return CocoIndex(kept, labels, annotation_file)


def _add_annotation(anno, images, labels, where) -> None:
    anno_id = _key(anno, "id", where)
    if anno.get("iscrowd", 0) == 1:   # OneFlow ignores crowd regions
        return
    image_id = _key(anno, "image_id", where)
    if not _is_int(image_id) or image_id not in images:
        raise ValueError(f"{where}: annotation {anno_id!r} refers to no image "
                         f"({str(image_id)[:40]})")
    bbox = _key(anno, "bbox", where)
    if not isinstance(bbox, list) or len(bbox) != 4 or not all(map(_is_finite, bbox)):
        raise ValueError(f"{where}: annotation {anno_id!r}: bbox must be [x, y, w, h] of "
                         f"finite numbers, got {str(bbox)[:80]}")
    category = _key(anno, "category_id", where)
    if not _is_int(category) or category not in labels:
        raise ValueError(f"{where}: annotation {anno_id!r}: category_id "
                         f"{str(category)[:40]} is not among the categories")
    segmentation = anno.get("segmentation", [])
    if not isinstance(segmentation, list):
        raise ValueError(f"{where}: annotation {anno_id}: segmentation must be a list of "
                         "polygons (run-length encodings are for crowd regions)")
    for polygon in segmentation:
        if (not isinstance(polygon, list) or len(polygon) <= 6 or len(polygon) % 2
                or not all(map(_is_finite, polygon))):
            raise ValueError(f"{where}: annotation {anno_id!r}: each polygon needs an even "
                             "number of coordinates, more than 6, all finite numbers")
    keypoints = anno.get("keypoints", [])
    if not isinstance(keypoints, list) or not all(map(_is_finite, keypoints)):
        raise ValueError(f"{where}: annotation {anno_id!r}: keypoints must be a list of "
                         "numbers")
    images[image_id].annotations.append({**anno, "segmentation": segmentation})


def _has_valid_annotations(image: CocoImage) -> bool:
    annotations = image.annotations
    if not annotations:
        return False
    if all(a["bbox"][2] <= 1 or a["bbox"][3] <= 1 for a in annotations):
        return False
    if "keypoints" not in annotations[0]:
        return True
    visible = sum(1 for a in annotations for v in a.get("keypoints", [])[2::3] if v > 0)
    return visible >= _MIN_VISIBLE_KEYPOINTS


def _list(data, key, where) -> list:
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, list):
        raise ValueError(f"{where}: expected a list under {key!r}")
    return value


def _key(entry, key, where):
    if not isinstance(entry, dict) or key not in entry:
        raise ValueError(f"{where}: an entry lacks {key!r}: {str(entry)[:80]}")
    return entry[key]


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_finite(value) -> bool:
    """A JSON number a float32 holds (the boxes and polygons become float32)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and abs(value) <= 3.4e38)


def _int(entry, key, where) -> int:
    value = _key(entry, key, where)
    if not _is_int(value) or abs(value) >= 2 ** 63:
        raise ValueError(f"{where}: {key!r} must be an integer, got {str(value)[:40]} in "
                         f"{str(entry)[:80]}")
    return value


def _str(entry, key, where) -> str:
    value = _key(entry, key, where)
    if not isinstance(value, str):
        raise ValueError(f"{where}: {key!r} must be a string, got {str(value)[:40]} in "
                         f"{str(entry)[:80]}")
    return value
