"""``flow.data.coco_reader`` on a tiny COCO-style data set written here: every output of
every step checked against the annotation file, with OneFlow's rules restated below as
the reference (tests/../aioflow/data/coco_annotations.py implements them)."""
import io
import json
from typing import Tuple

import numpy as np
import pytest
from PIL import Image

import aioflow as flow
import aioflow.typing as tp

CATEGORIES = [{"id": 10, "name": "c"}, {"id": 3, "name": "a"}, {"id": 7, "name": "b"}]
LABEL = {3: 1, 7: 2, 10: 3}       # contiguous labels, in ascending category id
IMAGES = [  # id, file, height, width
    (5, "e.png", 4, 10), (1, "a.png", 6, 8), (2, "b.png", 12, 5), (3, "c.png", 6, 6),
    (4, "d.png", 7, 9)]
ANNOTATIONS = [
    # image 1: two objects, the second reaching past the right and bottom edges
    {"id": 11, "image_id": 1, "category_id": 7, "iscrowd": 0, "bbox": [1.5, 0.5, 3.0, 2.25],
     "segmentation": [[1, 1, 4, 1, 4, 2, 1, 2]]},
    {"id": 12, "image_id": 1, "category_id": 10, "iscrowd": 0, "bbox": [6, 3, 5, 9],
     "segmentation": [[6, 3, 7, 3, 7, 5, 6, 5], [6.5, 4, 7, 4, 7, 5, 6.5, 5]]},
    # image 2 (portrait): one object and a crowd region, which is ignored
    {"id": 21, "image_id": 2, "category_id": 3, "iscrowd": 0, "bbox": [0, 2, 4, 8],
     "segmentation": [[0, 2, 3, 2, 3, 9, 0, 9]]},
    {"id": 22, "image_id": 2, "category_id": 7, "iscrowd": 1, "bbox": [0, 0, 5, 5],
     "segmentation": {"counts": [0, 25], "size": [12, 5]}},
    # image 3: only a box at most 1 pixel wide: no valid annotation, the image is left out
    {"id": 31, "image_id": 3, "category_id": 3, "iscrowd": 0, "bbox": [1, 1, 1, 4],
     "segmentation": [[1, 1, 2, 1, 2, 5, 1, 5]]},
    # image 4 has no annotation: left out. Image 5: a box left empty by the clipping
    # (dropped from gt_bbox, its label kept, as OneFlow), then a valid one
    {"id": 51, "image_id": 5, "category_id": 10, "iscrowd": 0, "bbox": [12, 1, 3, 2],
     "segmentation": [[9, 1, 9.5, 1, 9.5, 2, 9, 2]]},
    {"id": 52, "image_id": 5, "category_id": 3, "iscrowd": 0, "bbox": [0.25, 0, 9.5, 3.5],
     "segmentation": [[0, 0, 9, 0, 9, 3, 0, 3]]},
]
VALID_IDS = [1, 2, 5]


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


@pytest.fixture
def coco(tmp_path):
    rng = np.random.default_rng(0)
    for image_id, file_name, height, width in IMAGES:
        pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(tmp_path / file_name)
    annotation_file = tmp_path / "instances.json"
    annotation_file.write_text(json.dumps({
        "images": [{"id": i, "file_name": f, "height": h, "width": w}
                   for i, f, h, w in IMAGES],
        "annotations": ANNOTATIONS, "categories": CATEGORIES}))
    return str(annotation_file), str(tmp_path)


def reader_job(annotation_file, image_dir, batch_size, **kwargs):
    @flow.global_function(type="predict")
    def job() -> Tuple[(tp.Numpy,) * 7]:
        outputs = flow.data.coco_reader(annotation_file, image_dir, batch_size, **kwargs)
        assert [o.dtype for o in outputs] == [flow.tensor_buffer, flow.int64, flow.int32] + [
            flow.tensor_buffer] * 4
        assert outputs[2].shape == (batch_size, 2)
        assert all(o.shape == (batch_size,) for i, o in enumerate(outputs) if i != 2)
        return outputs
    return job


# -- the reference: OneFlow's rules, restated on the json ------------------------------------
def expected_boxes(image_id):
    _, _, height, width = next(i for i in IMAGES if i[0] == image_id)
    boxes = []
    for a in ANNOTATIONS:
        if a["image_id"] != image_id or a["iscrowd"]:
            continue
        x, y, w, h = a["bbox"]
        x2, y2 = x + max(w - 1, 0), y + max(h - 1, 0)
        x1, x2 = (min(max(v, 0), width - 1) for v in (x, x2))
        y1, y2 = (min(max(v, 0), height - 1) for v in (y, y2))
        if x2 > x1 and y2 > y1:
            boxes.append([x1, y1, x2, y2])
    return np.array(boxes, np.float64).reshape(-1, 4)


def own_annotations(image_id):
    return [a for a in ANNOTATIONS if a["image_id"] == image_id and not a["iscrowd"]]


def check_image(image_dir, outputs, row, image_id):
    image, ids, sizes, bbox, label, segm, segm_index = outputs
    _, file_name, height, width = next(i for i in IMAGES if i[0] == image_id)
    assert ids[row] == image_id and sizes[row].tolist() == [height, width]
    with open(f"{image_dir}/{file_name}", "rb") as f:
        assert image[row].dtype == np.int8 and image[row].tobytes() == f.read()
    assert bbox[row].dtype == np.float32
    np.testing.assert_allclose(bbox[row], expected_boxes(image_id), rtol=1e-6)
    annotations = own_annotations(image_id)
    assert label[row].dtype == np.int32
    assert label[row].tolist() == [LABEL[a["category_id"]] for a in annotations]
    points = [p for a in annotations for poly in a["segmentation"]
              for p in zip(poly[0::2], poly[1::2])]
    index = [(k, j, i) for i, a in enumerate(annotations)
             for j, poly in enumerate(a["segmentation"]) for k in range(len(poly) // 2)]
    assert segm[row].dtype == np.float32 and segm[row].tolist() == [list(p) for p in points]
    assert segm_index[row].dtype == np.int32 and segm_index[row].tolist() == [
        list(t) for t in index]


# -- the tests ---------------------------------------------------------------------------------
def test_every_output_matches_the_annotation_file(coco):
    annotation_file, image_dir = coco
    job = reader_job(annotation_file, image_dir, 2, shuffle=False, group_by_aspect_ratio=False)
    # Valid images in ascending id order, endlessly: [1, 2], [5, 1], [2, 5].
    for ids in ([1, 2], [5, 1], [2, 5]):
        outputs = job()
        for row, image_id in enumerate(ids):
            check_image(image_dir, outputs, row, image_id)
    # The clipped-away box of image 5 is dropped, its label kept (OneFlow's behaviour).
    assert len(expected_boxes(5)) == 1 and len(own_annotations(5)) == 2


def test_a_batch_holds_one_aspect_ratio_group(coco):
    annotation_file, image_dir = coco
    job = reader_job(annotation_file, image_dir, 2, shuffle=False)
    # Groups (height // width): images 1 and 5 are 0, image 2 is 2. The stream 1, 2, 5,
    # 1, 2, 5, ... fills group 0 first with [1, 5], then group 2 with [2, 2].
    batches = [job()[1].tolist() for _ in range(3)]
    assert batches == [[1, 5], [2, 2], [1, 5]]


def test_shuffled_epochs_are_permutations_and_the_seed_repeats_them(coco):
    annotation_file, image_dir = coco

    def epochs(seed):
        flow.clear_default_session()
        job = reader_job(annotation_file, image_dir, 3, shuffle=True, random_seed=seed,
                         group_by_aspect_ratio=False)
        return [job()[1].tolist() for _ in range(4)]

    first = epochs(7)
    assert all(sorted(epoch) == VALID_IDS for epoch in first)
    assert epochs(7) == first
    assert any(epochs(seed) != first for seed in (8, 9, 10))


def test_decoded_images_have_the_annotated_size(coco):
    annotation_file, image_dir = coco
    image, ids, sizes = reader_job(annotation_file, image_dir, 3, shuffle=False,
                                   group_by_aspect_ratio=False)()[:3]
    for row in range(3):
        decoded = Image.open(io.BytesIO(image[row].tobytes()))
        assert [decoded.height, decoded.width] == sizes[row].tolist()


def test_bad_data_sets_are_refused_with_the_file_and_entry(coco, tmp_path):
    annotation_file, image_dir = coco

    def trace(*args, **kwargs):
        flow.clear_default_session()
        reader_job(*args, **kwargs)()

    with pytest.raises(FileNotFoundError, match="no annotation file"):
        trace(str(tmp_path / "missing.json"), image_dir, 2)
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        trace(annotation_file, image_dir, 0)
    with open(annotation_file, encoding="utf-8") as f:
        broken = json.load(f)
    broken["annotations"][0]["segmentation"] = [[1, 1, 2, 2]]
    bad_file = tmp_path / "broken.json"
    bad_file.write_text(json.dumps(broken))
    with pytest.raises(ValueError, match="annotation 11: each polygon needs an even number "
                                         "of coordinates, more than 6"):
        trace(str(bad_file), image_dir, 2)
    (tmp_path / "a.png").unlink()
    with pytest.raises(FileNotFoundError, match="cannot read image 1's file"):
        trace(annotation_file, image_dir, 2, shuffle=False)


@pytest.mark.parametrize("backend", ["strict", pytest.param("cupy", marks=pytest.mark.gpu)])
def test_a_device_backend_keeps_tensor_buffers_on_the_host(coco, backend):
    """On a GPU (the strict backend stands in on the CPU) the reader's tensor buffers stay
    on the host, its numeric outputs and what ops compute of them live on the device."""
    from aioflow import backends

    annotation_file, image_dir = coco

    def job_on(name):
        flow.clear_default_session()
        with backends.use(name):
            @flow.global_function(type="predict")
            def job() -> Tuple[(tp.Numpy,) * 9]:
                outputs = flow.data.coco_reader(annotation_file, image_dir, 2, shuffle=False,
                                                group_by_aspect_ratio=False)
                doubled = flow.cast(outputs[2], flow.float) * 2.0    # on the device
                buffer = flow.tensor_to_tensor_buffer(doubled, instance_dims=1)   # host
                back = flow.tensor_buffer_to_tensor(buffer, dtype=flow.float,
                                                    instance_shape=(2,)) + 1.0   # device
                return (*outputs, doubled, back)
            return [job() for _ in range(3)]

    reference, device = job_on("numpy"), job_on(backend)
    for ids, on_cpu, on_device in zip(([1, 2], [5, 1], [2, 5]), reference, device):
        for row, image_id in enumerate(ids):
            check_image(image_dir, on_device[:7], row, image_id)
        np.testing.assert_array_equal(on_device[7], on_cpu[7])
        np.testing.assert_array_equal(on_device[8], on_cpu[8])
        assert on_device[7].tolist() == [[2.0 * v for v in s] for s in on_cpu[2].tolist()]
        assert on_device[8].tolist() == [[2.0 * v + 1 for v in s] for s in on_cpu[2].tolist()]


def test_a_backend_without_host_values_refuses_the_reader_when_compiling(coco):
    from types import SimpleNamespace

    from aioflow.ir import Graph
    from aioflow.ops.registry import MissingKernelError
    from aioflow.ops.tensor_buffer import check_backend

    graph = Graph("job")
    graph.add_placeholder((2,), flow.tensor_buffer, "COCOReader-image")
    check_backend(graph, SimpleNamespace(name="numpy", kernel_set="numpy"))
    with pytest.raises(MissingKernelError, match="COCOReader-image: a tensor_buffer Blob lives "
                                                 "on the host, and the 'other' backend"):
        check_backend(graph, SimpleNamespace(name="other", kernel_set="other"))


# -- OneFlow's sampling order: per-device shards, grouped batches ------------------------------
class _Image:
    def __init__(self, id_, group):
        self.id, self.group = id_, group


class _Index:
    def __init__(self, images):
        self.images = images


def _ids(stream, steps):
    batches = stream.batches()
    return [[image.id for image in next(batches)] for _ in range(steps)]


@pytest.mark.parametrize("stride, want", [
    # OneFlow's own table (user/data/distributed_training_dataset.h): 10 samples, 4 parts
    (True, [[0, 4, 8, 1, 5, 9, 2, 6, 0, 3, 7, 1], [2, 6, 0, 3, 7, 1, 4, 8, 2, 5, 9, 3]]),
    (False, [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1], [2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3]]),
])
def test_each_device_reads_its_shard_as_oneflow(stride, want):
    from aioflow.data.coco_reader import _ImageStream
    index = _Index([_Image(i, 0) for i in range(10)])
    stream = _ImageStream(index, 12, shuffle=False, group=False, seed=0, devices=4,
                          stride_partition=stride)
    assert _ids(stream, 2) == want


def test_a_batch_takes_the_group_of_the_earliest_buffered_batch():
    from aioflow.data.coco_reader import _ImageStream
    # groups 0, 1, 1, 0, 0, 0: OneFlow's GroupBatchDataset starts a batch of group 0, puts
    # the two group-1 samples aside (a batch of their own) and finishes [0, 3]; then
    # returns the buffered [1, 2] before reading on.
    index = _Index([_Image(i, g) for i, g in enumerate([0, 1, 1, 0, 0, 0])])
    stream = _ImageStream(index, 2, shuffle=False, group=True, seed=0)
    assert _ids(stream, 3) == [[0, 3], [1, 2], [4, 5]]


def test_a_placement_of_two_devices_reads_two_shards(coco):
    annotation_file, image_dir = coco

    @flow.global_function(type="predict")
    def job() -> tp.Numpy:
        with flow.scope.placement("cpu", "0:0-1"):
            return flow.data.coco_reader(annotation_file, image_dir, 2, shuffle=False,
                                         group_by_aspect_ratio=False,
                                         stride_partition=False)[1]

    # Valid ids 1, 2, 5 in contiguous shards of 2 (OneFlow's DistributedTrainingDataset:
    # past its shard a device skips the others' and wraps around): device 0 reads
    # positions 0, 1, then 4 % 3 = 1: ids 1, 2, 2; device 1 reads 2, then 3 % 3 = 0, then
    # 1 + 2 = 3 % 3 = 0 again: ids 5, 1, 1.
    assert [job().tolist() for _ in range(3)] == [[1, 5], [2, 1], [2, 1]]
