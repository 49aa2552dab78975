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
    a batch holds only images of one aspect-ratio group (height // width), in OneFlow's
    order (its ``GroupBatchDataset``). Under a placement of several devices
    (``flow.scope.placement("cpu", "0:0-3")``) each device reads ``batch_size / devices``
    images of its shard, as OneFlow's reader instances do, and the batch is theirs in
    device order: ``stride_partition`` shards by stride (device d reads d, d + devices,
    ...), else in contiguous ranges. Files are read on a background loader thread, ahead
    of the steps. (A shuffled order is numpy's, not OneFlow's ``std::mt19937``.)
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
    devices = graph.placement_devices
    if batch_size % devices:
        raise ValueError(f"{what}: batch_size {batch_size} must be a multiple of the "
                         f"placement's {devices} devices (each reads its share)")
    stream = _ImageStream(index, batch_size, bool(shuffle), bool(group_by_aspect_ratio), seed,
                          devices, bool(stride_partition))
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
    """Endless batches (lists of CocoImage) in OneFlow's order: one reader per device of
    the placement, each over its shard of the data set with ``batch_size / devices``
    images a step (``DistributedTrainingDataset``, then ``GroupBatchDataset`` or
    ``BatchDataset``), their batches concatenated in device order."""

    def __init__(self, index: CocoIndex, batch_size: int, shuffle: bool, group: bool,
                 seed: int | None, devices: int = 1, stride_partition: bool = True):
        self.images = index.images
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.group = group
        # None (no seed given nor set): one random base for every device's epochs
        self.seed = int(np.random.SeedSequence(seed).generate_state(1, np.uint32)[0])
        self.devices = devices
        self.stride_partition = stride_partition

    def _samples(self, device: int) -> Iterator:
        """One device's samples (OneFlow's ``DistributedTrainingDataset``): with stride
        partition the indices device, device + devices, ...; else its contiguous shard
        of ceil(size / devices), then the shard as far ahead again, wrapping around; each
        epoch in a new order with ``shuffle`` (the same order on every device)."""
        size = len(self.images)
        order = np.arange(size)
        epoch = 0

        def reshuffle():
            nonlocal order, epoch
            if self.shuffle:
                order = order[np.random.default_rng(self.seed + epoch).permutation(size)]
            epoch += 1

        reshuffle()
        shard = -(-size // self.devices)
        pos = device if self.stride_partition else device * shard
        in_shard = 0
        while True:
            yield self.images[order[pos]]
            if self.stride_partition:
                pos += self.devices
            else:
                pos, in_shard = pos + 1, in_shard + 1
                if in_shard == shard:
                    pos, in_shard = pos + (self.devices - 1) * shard, 0
            if pos >= size:
                reshuffle()
                pos %= size

    def _device_batches(self, device: int) -> Iterator[list]:
        samples = self._samples(device)
        size = self.batch_size // self.devices
        if not self.group:
            while True:
                yield list(itertools.islice(samples, size))
        # OneFlow's GroupBatchDataset: a batch takes the group of the earliest buffered
        # (partial) batch, else of the next sample; samples of other groups are buffered
        # into batches of their own group, in the order those batches were begun.
        buffered: dict[int, list[list]] = {}
        begun: dict[int, list[int]] = {}
        count = itertools.count()
        while True:
            heads = [(begun[g][0], g) for g, batches in buffered.items() if batches]
            batch, group = ([], None)
            if heads:
                group = min(heads)[1]
                batch = buffered[group].pop(0)
                begun[group].pop(0)
            while len(batch) < size:
                sample = next(samples)
                if group is None:
                    group = sample.group
                if sample.group == group:
                    batch.append(sample)
                    continue
                batches = buffered.setdefault(sample.group, [])
                if not batches or len(batches[-1]) == size:
                    batches.append([sample])
                    begun.setdefault(sample.group, []).append(next(count))
                else:
                    batches[-1].append(sample)
            yield batch

    def batches(self) -> Iterator[list]:
        streams = [self._device_batches(d) for d in range(self.devices)]
        while True:
            yield [sample for stream in streams for sample in next(stream)]


def _file_bytes(image_dir: str, image, what: str) -> np.ndarray:
    path = os.path.join(image_dir, image.file_name)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise FileNotFoundError(f"{what}: cannot read image {image.id}'s file {path}: "
                                f"{exc.strerror}") from None
    return np.frombuffer(data, dtype=np.int8).copy()
