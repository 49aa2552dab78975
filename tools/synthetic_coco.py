"""A small synthetic stand-in for COCO 2017's val set, for OneFlow's image and detection tests.

OneFlow v0.3.4's tests of ``flow.image_*``, ``flow.object_*`` and ``flow.data.coco_reader``
read ``/dataset/mscoco_2017`` (``val2017/*.jpg`` and ``annotations/instances_val2017.json``)
and compare aioflow's results with OpenCV's, Pillow's and pycocotools' readings of the
same files. Without the real data set (19 GB, not fetched here) ``tools/oneflow_tests.py``
writes this one and points the tests at it::

    python tools/synthetic_coco.py OUT_DIR      # writes OUT_DIR/{val2017, annotations}

It holds 400 JPEG images of COCO's usual sizes (landscape and portrait, the four file names
the tests name among them) with textured random content, and 2 to 5 objects per image:
polygon segmentations (one or two polygons an object), their ``[x, y, w, h]`` boxes and
areas, non-contiguous category ids, and a few crowd objects (RLE segmentations) that the
readers must skip. Deterministic: the same files every run. Needs numpy and Pillow (or
OpenCV) in the interpreter that runs it.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

# (image id, width, height): the ids and sizes of the four images the tests name
# (000000000139.jpg, ...) as in COCO, then others of COCO's common sizes, 400 in all: the
# tests draw images at random (with replacement), and test_object_segm_poly_to_mask's
# reference scales a drawn image's polygons in place once per draw, so a batch holding
# one image twice fails it; among 400 that is as rare as a failing test should be.
_NAMED = [(139, 640, 426), (632, 640, 483), (785, 640, 425), (1000, 640, 480)]
_SIZES = [(640, 426), (640, 480), (586, 640), (375, 500), (428, 640), (640, 427),
          (480, 640), (500, 500), (640, 424), (612, 612), (427, 640), (640, 360)]
IMAGES = _NAMED + [(2000 + 7 * k, *_SIZES[k % len(_SIZES)]) for k in range(396)]
CATEGORIES = [(1, "person"), (2, "bicycle"), (3, "car"), (5, "airplane"), (7, "train"),
              (18, "dog"), (44, "bottle"), (62, "chair")]


def _polygon(rng, width, height):
    """A convex polygon (flat [x0, y0, x1, y1, ...]) inside the image."""
    cx, cy = rng.uniform(0.15, 0.85) * width, rng.uniform(0.15, 0.85) * height
    radius = rng.uniform(0.05, 0.25) * min(width, height)
    count = int(rng.integers(4, 9))   # OneFlow's COCO reader needs more than 6 coordinates
    angles = np.sort(rng.uniform(0, 2 * np.pi, count))
    radii = radius * rng.uniform(0.6, 1.0, count)
    xs = np.clip(cx + radii * np.cos(angles), 0, width - 1)
    ys = np.clip(cy + radii * np.sin(angles), 0, height - 1)
    return [round(float(v), 2) for pair in zip(xs, ys) for v in pair]


def _box_and_area(polygons):
    points = np.concatenate([np.asarray(p).reshape(-1, 2) for p in polygons])
    x0, y0 = points.min(axis=0)
    x1, y1 = points.max(axis=0)
    area = 0.0
    for poly in polygons:
        xy = np.asarray(poly).reshape(-1, 2)
        area += 0.5 * abs(np.dot(xy[:, 0], np.roll(xy[:, 1], 1))
                          - np.dot(xy[:, 1], np.roll(xy[:, 0], 1)))
    bbox = [round(float(v), 2) for v in (x0, y0, x1 - x0, y1 - y0)]
    return bbox, round(float(area), 2)


def _pixels(rng, width, height):
    """Smooth gradients, blobs and some noise: resizing and decoding have work to do."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    image = np.empty((height, width, 3), np.float32)
    for c in range(3):
        fx, fy, phase = rng.uniform(0.005, 0.05, 2).tolist() + [rng.uniform(0, 6.3)]
        image[:, :, c] = 128 + 90 * np.sin(fx * xx + fy * yy + phase)
    for _ in range(6):
        cx, cy = rng.uniform(0, width), rng.uniform(0, height)
        r = rng.uniform(10, 80)
        mask = (xx - cx) ** 2 + (yy - cy) ** 2 < r * r
        image[mask] = rng.uniform(0, 255, 3)
    image += rng.normal(0, 6, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


def _write_jpeg(path: Path, rgb: np.ndarray) -> None:
    try:
        from PIL import Image
    except ImportError:
        import cv2
        cv2.imwrite(str(path), rgb[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, 90])
        return
    Image.fromarray(rgb).save(path, quality=90)


def write(root: Path) -> Path:
    """Writes the data set under ``root`` (``val2017/``, ``annotations/``); returns root."""
    rng = np.random.default_rng(20170417)
    images_dir, annos_dir = root / "val2017", root / "annotations"
    images_dir.mkdir(parents=True, exist_ok=True)
    annos_dir.mkdir(parents=True, exist_ok=True)
    images, annotations = [], []
    for image_id, width, height in IMAGES:
        name = f"{image_id:012d}.jpg"
        _write_jpeg(images_dir / name, _pixels(rng, width, height))
        images.append({"id": image_id, "file_name": name, "width": width, "height": height,
                       "license": 1, "coco_url": "", "flickr_url": "",
                       "date_captured": "2013-11-14 16:28:13"})
        for k in range(int(rng.integers(2, 6))):
            polygons = [_polygon(rng, width, height) for _ in range(1 + (k % 3 == 2))]
            bbox, area = _box_and_area(polygons)
            annotations.append({"id": len(annotations) + 1, "image_id": image_id,
                                "category_id": CATEGORIES[int(rng.integers(len(CATEGORIES)))][0],
                                "segmentation": polygons, "area": area, "bbox": bbox,
                                "iscrowd": 0})
        if image_id % 5 == 0:   # a crowd object: an RLE mask, which the readers skip
            bbox, area = _box_and_area([_polygon(rng, width, height)])
            annotations.append({"id": len(annotations) + 1, "image_id": image_id,
                                "category_id": CATEGORIES[0][0],
                                "segmentation": {"size": [height, width],
                                                 "counts": [width * height]},
                                "area": area, "bbox": bbox, "iscrowd": 1})
    document = {"info": {"description": "synthetic stand-in for COCO 2017 val (aioflow)"},
                "licenses": [{"id": 1, "name": "CC0", "url": ""}], "images": images,
                "annotations": annotations,
                "categories": [{"id": i, "name": n, "supercategory": n}
                               for i, n in CATEGORIES]}
    (annos_dir / "instances_val2017.json").write_text(json.dumps(document))
    return root


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/synthetic_coco.py OUT_DIR")
    print(write(Path(sys.argv[1])))
