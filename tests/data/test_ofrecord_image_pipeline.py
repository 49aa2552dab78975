"""OneFlow v0.3.4's ImageNet input pipeline on an OFRecord file written here:
``OFRecordImageDecoderRandomCrop`` -> ``flow.image.Resize`` -> ``flow.random.CoinFlip`` ->
``flow.image.CropMirrorNormalize`` (training, as OneFlow-Benchmark's ``ofrecord_util.py``
writes it), and the evaluation side (``OFRecordImageDecoder`` -> ``Resize`` keeping the
aspect ratio -> a centred crop). Values against numpy / Pillow references."""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow.data import ofrecord
from aioflow.kernels.image import random_crop_window

pytestmark = pytest.mark.filterwarnings("ignore:flow.image.Resize.*deprecated")

MEAN, STD = [123.68, 116.779, 103.939], [58.393, 57.12, 57.375]


def _images(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in sizes]


def _write(folder, images):
    ofrecord.write_ofrecord(folder, [{"encoded": ofrecord.encode_image(im),
                                      "class/label": np.int32(i)}
                                     for i, im in enumerate(images)])
    return str(folder)


def _contains(image, crop):
    """Whether ``crop`` is a window of ``image`` (exact pixels)."""
    h, w = crop.shape[:2]
    for y in range(image.shape[0] - h + 1):
        for x in range(image.shape[1] - w + 1):
            if np.array_equal(image[y:y + h, x:x + w], crop):
                return True
    return False


def test_random_crop_decoder_gives_windows_of_each_image(tmp_path):
    rgb = _images([(20, 30), (24, 16), (18, 18), (30, 22)])
    folder = _write(tmp_path / "train", rgb)

    @flow.global_function(type="predict")
    def crops() -> tp.Numpy:
        records = flow.data.ofrecord_reader(folder, batch_size=4)
        image = flow.data.OFRecordImageDecoderRandomCrop(records, "encoded",
                                                         color_space="RGB", seed=7)
        assert image.dtype == flow.tensor_buffer and image.shape == (4,)
        return flow.image.Resize(image, target_size=(8, 6))[1]

    scales = crops()
    assert scales.shape == (4, 2) and scales.dtype == np.float32
    # the same windows again, read back as tensor buffers of the crops themselves
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def raw() -> tp.ListListNumpy:
        records = flow.data.ofrecord_reader(folder, batch_size=4)
        image = flow.data.OFRecordImageDecoderRandomCrop(records, "encoded",
                                                         color_space="RGB", seed=7)
        return flow.tensor_buffer_to_tensor_list(image, shape=(30, 30, 3), dtype=flow.uint8)

    got = raw()[0]
    for source, crop, scale in zip(rgb, got, scales):
        crop = crop[0]
        assert _contains(source, crop)
        h, w = crop.shape[:2]
        assert 0.08 * source.size / 3 * 0.5 <= h * w <= source.size / 3
        np.testing.assert_allclose(scale, [8 / w, 6 / h], rtol=1e-6)


def test_random_crop_window_follows_oneflows_generator():
    rng = np.random.default_rng(0)
    for _ in range(200):
        (y, x), (h, w) = random_crop_window((40, 60), (0.08, 1.0), (0.75, 4 / 3), 10, rng)
        assert 0 <= y <= 40 - h and 0 <= x <= 60 - w
        assert 0.08 * 2400 * 0.9 <= h * w <= 2400
    # an area no window of the ratio can reach: the whole image, brought within the ratio
    (y, x), (h, w) = random_crop_window((10, 100), (0.9, 1.0), (0.75, 4 / 3), 10, rng)
    assert (h, w) == (10, 13)


def test_training_pipeline_as_oneflow_benchmark_writes_it(tmp_path):
    rgb = _images([(20, 30), (24, 16), (18, 18), (30, 22)], seed=1)
    folder = _write(tmp_path / "train", rgb)

    @flow.global_function(type="predict")
    def load() -> tp.Numpy:
        ofrecord_blob = flow.data.ofrecord_reader(folder, batch_size=4, data_part_num=1,
                                                  part_name_suffix_length=-1,
                                                  random_shuffle=True, shuffle_after_epoch=True)
        image = flow.data.OFRecordImageDecoderRandomCrop(ofrecord_blob, "encoded",
                                                         color_space="BGR")
        label = flow.data.OFRecordRawDecoder(ofrecord_blob, "class/label", shape=(),
                                             dtype=flow.int32)
        rsz = flow.image.Resize(image, resize_x=12, resize_y=12, color_space="BGR")
        rng = flow.random.CoinFlip(batch_size=4)
        normal = flow.image.CropMirrorNormalize(rsz, mirror_blob=rng, color_space="BGR",
                                                mean=MEAN, std=STD, output_dtype=flow.float)
        return normal + flow.cast(flow.reshape(label, (4, 1, 1, 1)), flow.float) * 0

    out = load()
    assert out.shape == (4, 3, 12, 12) and out.dtype == np.float32
    assert np.all(np.isfinite(out)) and -3 < out.mean() < 3


def test_crop_mirror_normalize_matches_numpy():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 256, (3, 9, 11, 3), dtype=np.uint8)
    flip = np.array([0, 1, 1], np.int8)

    @flow.global_function(type="predict")
    def cmn(images: tp.Numpy.Placeholder((3, 9, 11, 3), dtype=flow.uint8),
            mirror: tp.Numpy.Placeholder((3,), dtype=flow.int8)) -> tp.Numpy:
        return flow.image.CropMirrorNormalize(images, mirror_blob=mirror, crop_h=5, crop_w=6,
                                              crop_pos_y=0.3, crop_pos_x=1.0, mean=MEAN,
                                              std=STD)

    y0, x0 = int(4 * 0.3), 5
    want = x[:, y0:y0 + 5, x0:x0 + 6].astype(np.float32)
    want[flip == 1] = want[flip == 1][:, :, ::-1]
    want = ((want - np.float32(MEAN)) / np.float32(STD)).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(cmn(x, flip), want, rtol=1e-6, atol=1e-6)


def test_evaluation_pipeline_resizes_the_shorter_side_then_crops_the_centre(tmp_path):
    rgb = _images([(20, 30), (20, 30)], seed=3)
    folder = _write(tmp_path / "val", rgb)

    @flow.global_function(type="predict")
    def load() -> tp.Numpy:
        records = flow.data.ofrecord_reader(folder, batch_size=2)
        image = flow.data.OFRecordImageDecoder(records, "encoded", color_space="RGB")
        rsz, scale, size = flow.image.Resize(image, target_size=10, keep_aspect_ratio=True)
        normal = flow.image.CropMirrorNormalize(rsz, color_space="RGB", crop_h=8, crop_w=8,
                                                output_layout="NHWC")
        return normal + flow.reshape(flow.cast(size, flow.float), (2, 1, 1, 2))[..., :1] * 0

    got = load()
    # 20x30 to 10x15 shrinks: OneFlow's "auto" interpolation is OpenCV's area averaging,
    # here 2x2 block means (uint8 rounded half up, as OpenCV's resizeAreaFast).
    blocks = rgb[0].reshape(10, 2, 15, 2, 3).astype(np.int64).sum(axis=(1, 3))
    resized = ((blocks + 2) // 4).astype(np.uint8)
    want = resized[1:9, 3:11].astype(np.float32)
    np.testing.assert_array_equal(got[0], want)


@pytest.mark.parametrize("call, exc, match", [
    (lambda im: flow.image.Resize(im, target_size=10), ValueError,
     "target_size must be \\(width, height\\)"),
    (lambda im: flow.image.Resize(im, target_size=(4, 4), interpolation_type="lanczos"),
     ValueError, "interpolation_type"),
    (lambda im: flow.image.CropMirrorNormalize(im, mean=[1.0, 2.0]), ValueError,
     "mean must hold 1 or 3 values"),
    (lambda im: flow.image.CropMirrorNormalize(im, color_space="GRAY"), ValueError,
     "color_space 'GRAY' has 1"),
    (lambda im: flow.image.CropMirrorNormalize(im, crop_pos_x=2.0), ValueError,
     "crop_pos_x must lie in \\[0, 1\\]"),
    (lambda im: flow.image.CropMirrorNormalize(flow.cast(im, flow.float)), TypeError,
     "image must be a tensor buffer"),
])
def test_bad_arguments_name_the_argument(call, exc, match):
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((1, 4, 4, 3), dtype=flow.uint8)) -> tp.Numpy:
        out = call(x)
        return out[0] if isinstance(out, tuple) else out

    with pytest.raises(exc, match=match):
        job(np.zeros((1, 4, 4, 3), np.uint8))


def test_random_crop_decoder_refuses_bad_ranges(tmp_path):
    folder = _write(tmp_path / "d", _images([(8, 8)]))

    @flow.global_function(type="predict")
    def job() -> tp.Numpy:
        records = flow.data.ofrecord_reader(folder, batch_size=1)
        image = flow.data.OFRecordImageDecoderRandomCrop(records, "encoded",
                                                         random_area=(0.5, 2.0))
        return flow.image.Resize(image, target_size=(4, 4))[0]

    with pytest.raises(ValueError, match="random_area must satisfy"):
        job()
