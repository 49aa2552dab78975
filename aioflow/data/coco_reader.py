"""``flow.data.coco_reader``: a COCO detection data set read inside a job, one batch of
images with their boxes, labels and polygons per step, as tensor buffers.

>>> import json, os, numpy as np, aioflow as flow, aioflow.typing as tp
>>> from typing import Tuple
>>> from PIL import Image
>>> os.makedirs("coco_example", exist_ok=True)     # a new folder in the current directory
>>> Image.new("RGB", (8, 6)).save("coco_example/a.png")
>>> with open("coco_example/annotations.json", "w") as f:
...     json.dump({"images": [{"id": 1, "file_name": "a.png", "height": 6, "width": 8}],
...                "categories": [{"id": 5, "name": "thing"}],
...                "annotations": [{"id": 1, "image_id": 1, "category_id": 5, "iscrowd": 0,
...                                 "bbox": [1, 1, 4, 3],
...                                 "segmentation": [[1, 1, 4, 1, 4, 3, 1, 3]]}]}, f)
>>> @flow.global_function(type="predict")
... def coco_job() -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
...     image, image_id, image_size, bbox, label, segm, segm_index = flow.data.coco_reader(
...         "coco_example/annotations.json", "coco_example", batch_size=1, shuffle=False)
...     return image_id, image_size, flow.tensor_buffer_to_tensor(
...         bbox, dtype=flow.float, instance_shape=(1, 4))
>>> coco_job()
(array([1]), array([[6, 8]], dtype=int32), array([[[1., 1., 4., 3.]]], dtype=float32))
"""
from __future__ import annotations

import itertools
import os
from typing import Iterator

import numpy as np

from .._core import dtypes
from .._core import seeds
from ..ir import current_graph
from ..ops.tensor_buffer import object_array
from .coco_annotations import CocoIndex, load_index
from .job_feeds import FeedSource

__all__ = ["coco_reader"]


def coco_reader(annotation_file: str, image_dir: str, batch_size: int, shuffle: bool = True,
                random_seed: int | None = None, group_by_aspect_ratio: bool = True,
                stride_partition: bool = True, name: str | None = None):
    """``(image, image_id, image_size, gt_bbox, gt_label, gt_segm, gt_segm_index)``, each
    step the next ``batch_size`` images of the COCO data set ``annotation_file`` (a JSON
    file of ``images``, ``annotations``, ``categories``) whose files lie in ``image_dir``.

    * ``image``: tensor buffer ``(batch_size,)``, each the encoded file's bytes as int8
      (OneFlow's kChar; ``.tobytes()`` gives the file back);
    * ``image_id``: int64 ``(batch_size,)``; ``image_size``: int32 ``(batch_size, 2)``,
      height and width from the annotation file;
    * ``gt_bbox``: tensor buffer of float32 ``(boxes, 4)`` ``[x1, y1, x2, y2]``;
      ``gt_label``: of int32 ``(annotations,)``, labels 1..K;
      ``gt_segm``: of float32 ``(points, 2)``; ``gt_segm_index``: of int32 ``(points, 3)``
      (see :mod:`aioflow.data.coco_annotations` for OneFlow's exact rules).

    Images without a valid annotation are left out; the others are read in ascending id
    order, in a new random order each epoch with ``shuffle`` (seeded by ``random_seed``,
    else by ``flow.random.seed``, else at random), endlessly. ``group_by_aspect_ratio``:
    a batch holds only images of one aspect-ratio group (height // width), as OneFlow's.
    ``stride_partition`` split the data set among devices in OneFlow: accepted, no effect
    in one process. Files are read on a background loader thread, ahead of the steps.
    """
    graph = current_graph()
    what = "flow.data.coco_reader"
    for arg, value in (("annotation_file", annotation_file), ("image_dir", image_dir)):
        if not isinstance(value, str) or not value:
            raise TypeError(f"{what}: {arg} must be a non-empty str, got {value!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise ValueError(f"{what}: batch_size must be a positive int, got {batch_size!r}")
    if random_seed is not None and (isinstance(random_seed, bool)
                                    or not isinstance(random_seed, (int, np.integer))):
        raise TypeError(f"{what}: random_seed must be an int or None, got {random_seed!r}")
    index = load_index(annotation_file, image_dir, what)
    if not index.images:
        raise ValueError(f"{what}: {annotation_file} has no image with a valid annotation")
    batch_size = int(batch_size)
    seed = seeds.loader_seed() if random_seed is None else int(random_seed)
    stream = _ImageStream(index, batch_size, bool(shuffle), bool(group_by_aspect_ratio), seed)
    name = name or graph.unique_name("COCOReader")
    source = FeedSource(graph, stream.batches, f"{what} {name!r}")
    buffer, batch = dtypes.tensor_buffer, (batch_size,)
    fields = [
        ("image", batch, buffer, lambda images: object_array(
            [_file_bytes(image_dir, image, what) for image in images])),
        ("image_id", batch, dtypes.int64,
         lambda images: np.array([image.id for image in images], dtype=np.int64)),
        ("image_size", (batch_size, 2), dtypes.int32, lambda images: np.array(
            [(image.height, image.width) for image in images], dtype=np.int32)),
        ("gt_bbox", batch, buffer, lambda images: object_array(
            [index.bboxes(image) for image in images])),
        ("gt_label", batch, buffer, lambda images: object_array(
            [index.labels_of(image) for image in images])),
        ("gt_segm", batch, buffer, lambda images: object_array(
            [index.segmentation(image)[0] for image in images])),
        ("gt_segm_index", batch, buffer, lambda images: object_array(
            [index.segmentation(image)[1] for image in images])),
    ]
    return tuple(source.add_field(decode, shape, dtype, f"{name}-{label}")
                 for label, shape, dtype, decode in fields)


class _ImageStream:
    """Endless batches (lists of CocoImage), in OneFlow's order (see coco_reader)."""

    def __init__(self, index: CocoIndex, batch_size: int, shuffle: bool, group: bool,
                 seed: int):
        self.images = index.images
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.group = group
        self.seed = seed

    def _samples(self) -> Iterator:
        rng = np.random.default_rng(self.seed)
        for _ in itertools.count():
            order = rng.permutation(len(self.images)) if self.shuffle else range(
                len(self.images))
            for i in order:
                yield self.images[i]

    def batches(self) -> Iterator[list]:
        samples = self._samples()
        if not self.group:
            while True:
                yield list(itertools.islice(samples, self.batch_size))
        # Each sample waits in its group's queue; a full queue is the next batch.
        pending: dict[int, list] = {}
        for sample in samples:
            queue = pending.setdefault(sample.group, [])
            queue.append(sample)
            if len(queue) == self.batch_size:
                yield pending.pop(sample.group)


def _file_bytes(image_dir: str, image, what: str) -> np.ndarray:
    path = os.path.join(image_dir, image.file_name)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise FileNotFoundError(f"{what}: cannot read image {image.id}'s file {path}: "
                                f"{exc.strerror}") from None
    return np.frombuffer(data, dtype=np.int8).copy()
