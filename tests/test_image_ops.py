"""OneFlow v0.3.4's image and detection ops (``flow.image.*``, ``flow.detection.*``) on
tensor buffers made from tensor lists, as OneFlow's own tests drive them, each checked
against numpy written from OneFlow's kernels (``user/kernels/image_*``,
``image_object_preprocess_kernels.cpp``) and OpenCV's formulas. Without OpenCV installed
the kernels run their numpy ports (``aioflow/kernels/image.py``); with it, they call it,
and the last tests hold the ports to it."""
import io
from typing import Tuple

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow.kernels import image as kimage
from aioflow.ops.image_ops import keep_aspect_ratio_size


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _mirrored():
    config = flow.FunctionConfig()
    config.default_logical_view(flow.scope.mirrored_view())
    return config


def _as_list(images):
    """A tp.ListListNumpy argument: one list of (1, ...) tensors."""
    return [[np.expand_dims(image, 0) for image in images]]


def _static(images):
    return (len(images),) + tuple(np.max([image.shape for image in images], axis=0))


def _bilinear_reference(image, width, height):
    """OpenCV's INTER_LINEAR in float64: half-pixel centres, edges replicated."""
    def axis(src, dst):
        pos = (np.arange(dst) + 0.5) * (src / dst) - 0.5
        low = np.floor(pos).astype(int)
        frac = pos - low
        frac[(low < 0) | (low >= src - 1)] = 0
        low = np.clip(low, 0, src - 1)
        return low, np.minimum(low + 1, src - 1), frac

    y0, y1, fy = axis(image.shape[0], height)
    x0, x1, fx = axis(image.shape[1], width)
    img = image.astype(np.float64)
    rows = img[y0] * (1 - fy)[:, None, None] + img[y1] * fy[:, None, None]
    return rows[:, x0] * (1 - fx)[None, :, None] + rows[:, x1] * fx[None, :, None]


def test_keep_aspect_ratio_resize_sizes_scales_and_pixels_as_oneflow():
    rng = np.random.default_rng(0)
    images = [rng.uniform(0, 255, (7, 10, 3)).astype(np.float32),
              rng.uniform(0, 255, (6, 9, 3)).astype(np.float32)]

    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListListNumpy.Placeholder(_static(images), dtype=flow.float)) \
            -> Tuple[tp.ListListNumpy, tp.ListNumpy, tp.ListNumpy]:
        out, size, scale = flow.image.target_resize(flow.tensor_list_to_tensor_buffer(x),
                                                    target_size=14, max_size=20)
        return flow.tensor_buffer_to_tensor_list(out, shape=(20, 20, 3),
                                                 dtype=flow.float), size, scale

    out, size, scale = job(_as_list(images))
    # 7x10: shorter side 14, longer round(14 / 0.7) = 20. 6x9: round(14 * 1.5) = 21 is over
    # max_size 20, so the longer side is 20 and the shorter round(20 * 6 / 9) = 13.
    assert size[0].tolist() == [[20, 14], [20, 13]]
    np.testing.assert_allclose(scale[0], [[2.0, 2.0], [20 / 9, 13 / 6]], rtol=1e-6)
    for got, image, (w, h) in zip(out[0], images, size[0]):
        assert got.shape == (1, h, w, 3)
        np.testing.assert_allclose(got[0], _bilinear_reference(image, w, h), rtol=1e-4,
                                   atol=1e-3)   # growing: "auto" is bilinear


def test_keep_aspect_ratio_sizes_round_half_to_even():
    # OneFlow's kernel rounds with std::nearbyint (FE_TONEAREST): 2 / 0.8 = 2.5 -> 2.
    assert kimage_size(4, 5, target=2) == (2, 2)
    assert kimage_size(4, 7, target=2) == (2, 4)   # 3.5 -> 4
    assert kimage_size(640, 426, target=800, max_size=1333) == (1202, 800)


def kimage_size(h, w, target, max_size=0, min_size=0, longer=False):
    nh, nw = keep_aspect_ratio_size(h, w, target, min_size, max_size, longer)
    return nh, nw


def test_resize_to_fixed_converts_after_resizing_and_shrinks_by_area():
    rng = np.random.default_rng(1)
    images = [rng.integers(0, 256, (8, 12, 3)).astype(np.uint8) for _ in range(2)]

    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListListNumpy.Placeholder(_static(images), dtype=flow.uint8)) \
            -> Tuple[tp.ListNumpy, tp.ListNumpy]:
        out, scale, _ = flow.image.resize(flow.tensor_list_to_tensor_buffer(x),
                                          target_size=(6, 4), dtype=flow.float)
        return out, scale

    out, scale = job(_as_list(images))
    # "auto" shrinks by area averaging: 2x2 block means, uint8 ones rounded half up
    # (OpenCV's resizeAreaFast), then converted to float.
    blocks = np.stack(images).reshape(2, 4, 2, 6, 2, 3).astype(np.int64).sum(axis=(2, 4))
    np.testing.assert_array_equal(out[0], ((blocks + 2) // 4).astype(np.float32))
    np.testing.assert_array_equal(scale[0], [[0.5, 0.5], [0.5, 0.5]])


def test_decode_flip_normalize_and_batch_align():
    Image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(2)
    rgbs = [rng.integers(0, 256, (5, 7, 3), dtype=np.uint8),
            rng.integers(0, 256, (9, 4, 3), dtype=np.uint8)]
    encoded = []
    for rgb in rgbs:
        data = io.BytesIO()
        Image.fromarray(rgb).save(data, format="PNG")     # lossless: exact pixels back
        encoded.append(np.frombuffer(data.getvalue(), np.int8))
    std, mean = (2.0, 4.0, 8.0), (1.0, 2.0, 3.0)

    @flow.global_function(function_config=_mirrored())
    def job(data: tp.ListListNumpy.Placeholder(_static(encoded), dtype=flow.int8),
            codes: tp.ListNumpy.Placeholder((2,), dtype=flow.int8)) \
            -> Tuple[tp.ListListNumpy, tp.ListNumpy]:
        images = flow.image.decode(flow.tensor_list_to_tensor_buffer(data), dtype=flow.float)
        flipped = flow.image.flip(images, codes)
        normal = flow.image.normalize(flipped, std=std, mean=mean)
        aligned = flow.image.batch_align(normal, shape=(16, 16, 3), dtype=flow.float,
                                         alignment=8)
        return flow.tensor_buffer_to_tensor_list(normal, shape=(9, 7, 3),
                                                 dtype=flow.float), aligned

    normal, aligned = job(_as_list(encoded), [np.array([1, 17], np.int8)])
    bgr = [rgb[:, :, ::-1].astype(np.float32) for rgb in rgbs]
    want = [bgr[0][:, ::-1], bgr[1][::-1, ::-1]]           # 1: left-right; 17: both
    want = [(w - np.float32(mean)) / np.float32(std) for w in want]
    for got, w in zip(normal[0], want):
        np.testing.assert_allclose(got[0], w, rtol=1e-6)
    # batch_align: the largest height 9 and width 7, rounded up to 8: (2, 16, 8, 3)
    assert aligned[0].shape == (2, 16, 8, 3)
    padded = np.zeros((2, 16, 8, 3), np.float32)
    for i, w in enumerate(want):
        padded[i, :w.shape[0], :w.shape[1]] = w
    np.testing.assert_allclose(aligned[0], padded, rtol=1e-6)


def test_random_crop_draws_oneflows_windows_from_its_seed_every_step():
    rng = np.random.default_rng(3)
    images = [rng.integers(0, 256, (20, 30, 3), dtype=np.uint8),
              rng.integers(0, 256, (16, 12, 3), dtype=np.uint8)]

    @flow.global_function(function_config=_mirrored())
    def crop(data: tp.ListListNumpy.Placeholder(_static(images), dtype=flow.uint8)
             ) -> tp.ListListNumpy:
        cropped = flow.image.random_crop(flow.tensor_list_to_tensor_buffer(data), seed=7,
                                         random_area=(0.2, 0.9))
        return flow.tensor_buffer_to_tensor_list(cropped, shape=_static(images)[1:],
                                                 dtype=flow.uint8)

    # the oracle: the same windows drawn in order from a generator seeded alike
    oracle = np.random.default_rng(7)
    for step in range(3):                       # new windows every step
        got = crop(_as_list(images))[0]
        for image, out in zip(images, got):
            (y, x), (h, w) = kimage.random_crop_window(image.shape[:2], (0.2, 0.9),
                                                       (0.75, 1.333333), 10, oracle)
            np.testing.assert_array_equal(out[0], image[y:y + h, x:x + w])


def test_random_crop_refuses_bad_arguments_naming_them():
    @flow.global_function(function_config=_mirrored())
    def job(data: tp.ListListNumpy.Placeholder((1, 4, 4, 3), dtype=flow.uint8)
            ) -> tp.ListListNumpy:
        buffer = flow.tensor_list_to_tensor_buffer(data)
        with pytest.raises(ValueError, match="random_area must satisfy"):
            flow.image.random_crop(buffer, random_area=(0.5, 1.5))
        with pytest.raises(ValueError, match="num_attempts must be a positive int"):
            flow.image.random_crop(buffer, num_attempts=0)
        with pytest.raises(TypeError, match="seed must be an int"):
            flow.image.random_crop(buffer, seed=1.5)
        return flow.tensor_buffer_to_tensor_list(flow.image_random_crop(buffer),
                                                 shape=(4, 4, 3), dtype=flow.uint8)

    out = job([[np.zeros((1, 4, 4, 3), np.uint8)]])
    assert out[0][0].shape[1] <= 4 and out[0][0].shape[2] <= 4


def test_box_and_polygon_transforms_on_tensor_buffers():
    boxes = [np.array([[1, 2, 5, 6], [0, 0, 9, 3]], np.float32),
             np.array([[2, 1, 3, 4]], np.float32)]
    points = [np.array([[1, 1], [5, 1], [5, 4], [1, 4]], np.float32),
              np.array([[0.5, 0.5], [2, 0.5], [2, 2]], np.float32)]
    sizes = np.array([[10, 8], [6, 5]], np.int32)
    scales = np.array([[2.0, 0.5], [1.5, 3.0]], np.float32)

    @flow.global_function(function_config=_mirrored())
    def job(b: tp.ListListNumpy.Placeholder(_static(boxes)),
            p: tp.ListListNumpy.Placeholder(_static(points)),
            size: tp.ListNumpy.Placeholder((2, 2), dtype=flow.int32),
            scale: tp.ListNumpy.Placeholder((2, 2))) -> Tuple[(tp.ListListNumpy,) * 4]:
        bb, pb = flow.tensor_list_to_tensor_buffer(b), flow.tensor_list_to_tensor_buffer(p)
        outs = (flow.detection.object_bbox_flip(bb, size, 1),
                flow.detection.object_bbox_scale(bb, scale),
                flow.detection.object_segmentation_polygon_flip(pb, size, 16),
                flow.detection.object_segmentation_polygon_scale(pb, scale))
        return tuple(flow.tensor_buffer_to_tensor_list(o, shape=s, dtype=flow.float)
                     for o, s in zip(outs, [(2, 4), (2, 4), (4, 2), (4, 2)]))

    flipped, scaled, pflipped, pscaled = job(_as_list(boxes), _as_list(points), [sizes],
                                             [scales])
    for i, (w, h) in enumerate(sizes):
        want = boxes[i].copy()
        want[:, 0], want[:, 2] = w - boxes[i][:, 2] - 1, w - boxes[i][:, 0] - 1
        np.testing.assert_array_equal(flipped[0][i][0], want)
        np.testing.assert_array_equal(scaled[0][i][0], boxes[i] * np.tile(scales[i], 2))
        want = points[i].copy()
        want[:, 1] = h - points[i][:, 1]                  # polygons: no "- 1"
        np.testing.assert_array_equal(pflipped[0][i][0], want)
        np.testing.assert_array_equal(pscaled[0][i][0], points[i] * scales[i])


def test_polygon_to_mask_fills_each_object_outline_included():
    # image 0: object 0 a rectangle; object 1 a rectangle with a hole (two polygons:
    # fillPoly's even-odd rule, the hole's outline filled). Image 1: a rectangle whose
    # corners round half to even.
    poly = [np.array([[1, 1], [4, 1], [4, 3], [1, 3],
                      [0, 0], [7, 0], [7, 5], [0, 5], [2, 1], [5, 1], [5, 4], [2, 4]],
                     np.float32),
            np.array([[0.4, 0.6], [2.5, 0.6], [2.5, 2.4], [0.4, 2.4]], np.float32)]
    index = [np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0],
                       [0, 0, 1], [1, 0, 1], [2, 0, 1], [3, 0, 1],
                       [0, 1, 1], [1, 1, 1], [2, 1, 1], [3, 1, 1]], np.int32),
             np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0]], np.int32)]
    sizes = np.array([[8, 6], [4, 4]], np.int32)

    @flow.global_function(function_config=_mirrored())
    def job(p: tp.ListListNumpy.Placeholder(_static(poly)),
            k: tp.ListListNumpy.Placeholder(_static(index), dtype=flow.int32),
            size: tp.ListNumpy.Placeholder((2, 2), dtype=flow.int32)) -> tp.ListListNumpy:
        masks = flow.detection.object_segmentation_polygon_to_mask(
            flow.tensor_list_to_tensor_buffer(p), flow.tensor_list_to_tensor_buffer(k), size)
        return flow.tensor_buffer_to_tensor_list(masks, shape=(2, 6, 8), dtype=flow.int8)

    masks = job(_as_list(poly), _as_list(index), [sizes])[0]
    first = np.zeros((2, 6, 8), np.int8)
    first[0, 1:4, 1:5] = 1
    first[1] = 1
    first[1, 2:4, 3:5] = 0          # inside the hole, which has its outline filled
    np.testing.assert_array_equal(masks[0][0], first)
    second = np.zeros((1, 4, 4), np.int8)
    second[0, 1:3, 0:3] = 1         # (0.4, 0.6) -> (0, 1), (2.5, 2.4) -> (2, 2)
    np.testing.assert_array_equal(masks[1][0], second)


@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
@pytest.mark.parametrize("kind", ["bilinear", "nearest_neighbor", "bicubic", "area"])
def test_numpy_ports_follow_opencv(monkeypatch, kind, dtype):
    cv2 = pytest.importorskip("cv2")
    cv2.ipp.setUseIPP(False)         # IPP's float kernels round differently
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, (37, 53, 3)).astype(dtype)
    for width, height in [(224, 224), (26, 18), (17, 13), (106, 74), (53, 37)]:
        want = cv2.resize(image, (width, height), interpolation=kimage._CV_FLAGS[kind])
        with monkeypatch.context() as patch:
            patch.setattr(kimage, "_cv2", lambda: None)
            got = kimage.resize(image, width, height, kind)
        if dtype == np.uint8:
            assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
        else:
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
