"""``flow.data.ImageDecoderRandomCropResize`` (OneFlow v0.3.4's op) on OFRecord files of
encoded images of different sizes, written here: the reader's bytes
(``OFRecordBytesDecoder``) decoded, cropped to OneFlow's random windows and resized, checked
against references drawing the same windows from a generator seeded the same way, and
against the images themselves where the crop and the resize are exact (PNG, lossless)."""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow.data import ofrecord
from aioflow.kernels.image import decode, random_crop_window, resize

MEAN, STD = [123.68, 116.779, 103.939], [58.393, 57.12, 57.375]

AREA, RATIO = (0.08, 1.0), (0.75, 1.333333)     # OneFlow's defaults


def _images(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in sizes]


def _write(folder, images, fmt):
    encoded = [ofrecord.encode_image(im, fmt) for im in images]
    ofrecord.write_ofrecord(folder, [{"encoded": data, "class/label": np.int32(i)}
                                     for i, data in enumerate(encoded)])
    return str(folder), encoded


def _crop_resize_job(folder, batch_size, width, height, **kwargs):
    @flow.global_function(type="predict")
    def job() -> tp.Numpy:
        records = flow.data.ofrecord_reader(folder, batch_size=batch_size)
        encoded = flow.data.OFRecordBytesDecoder(records, "encoded")
        return flow.data.ImageDecoderRandomCropResize(encoded, target_width=width,
                                                      target_height=height, **kwargs)
    return job


def test_windows_and_resize_match_a_reference_drawn_with_the_same_seed(tmp_path):
    folder, encoded = _write(tmp_path / "jpeg", _images([(40, 60), (64, 48), (33, 33),
                                                         (50, 70)]), "JPEG")
    # JPEGs of different sizes: the dense bytes blob could not hold them together
    assert len({len(data) for data in encoded}) == 4
    job = _crop_resize_job(folder, 4, width=32, height=24, seed=5)
    steps = [job() for _ in range(3)]   # the 4 records again each step, new windows

    rng = np.random.default_rng(5)
    for got in steps:
        assert got.shape == (4, 24, 32, 3) and got.dtype == np.uint8
        for data, image in zip(encoded, got):
            pixels = decode(data, "RGB")
            (y, x), (h, w) = random_crop_window(pixels.shape[:2], AREA, RATIO, 10, rng)
            want = resize(pixels[y:y + h, x:x + w], 32, 24, "bilinear")
            np.testing.assert_array_equal(image, want)
    assert not np.array_equal(steps[0], steps[1])


def test_whole_image_window_gives_the_rgb_pixels_back(tmp_path):
    # random_area (1, 1) and random_aspect_ratio the image's own w/h (15/12) exactly: every
    # attempt is the whole image (as the fallback would be), and a target of the image's
    # size resizes nothing: the output is the image itself, in RGB order (OneFlow's
    # kernel converts OpenCV's BGR), with no reference code at all. (A ratio range around
    # 15/12 would not do: a ratio in (1.152, 1.168) rounds to a 12x14 window.)
    rgb = _images([(12, 15)] * 3, seed=1)
    folder, _ = _write(tmp_path / "png", rgb, "PNG")
    job = _crop_resize_job(folder, 3, width=15, height=12, random_area=(1.0, 1.0),
                           random_aspect_ratio=(1.25, 1.25))
    for _ in range(3):
        np.testing.assert_array_equal(job(), np.stack(rgb))


def test_fallback_window_when_no_attempt_fits(tmp_path):
    # 20x20 images, area 0.5 and ratio 1.05 exactly: every attempt rounds to a 14x14 window
    # (ratio 1, not 1.05), so OneFlow's fallback takes the whole image brought within the
    # ratio (19 rows, 20 columns) and scaled to the area: 13x14. Its corner is drawn too
    # (OneFlow's window is not centred). A 14x13 target resizes nothing, so each output
    # must be a 13x14 window of its image.
    rgb = _images([(20, 20)] * 4, seed=2)
    folder, _ = _write(tmp_path / "png", rgb, "PNG")
    job = _crop_resize_job(folder, 4, width=14, height=13, seed=11, random_area=(0.5, 0.5),
                           random_aspect_ratio=(1.05, 1.05), num_attempts=3)
    rng = np.random.default_rng(11)
    corners = set()
    for _ in range(3):
        for image, out in zip(rgb, job()):
            found = [(y, x) for y in range(8) for x in range(7)
                     if np.array_equal(image[y:y + 13, x:x + 14], out)]
            assert len(found) == 1
            corners.add(found[0])
            window = random_crop_window((20, 20), (0.5, 0.5), (1.05, 1.05), 3, rng)
            assert window == (found[0], (13, 14))
    assert len(corners) > 1


def test_oneflow_benchmark_training_input(tmp_path):
    """OneFlow-Benchmark's Classification/cnns/ofrecord_util.py, gpu_image_decoder path."""
    rgb = _images([(40, 60), (64, 48), (33, 33), (50, 70), (45, 30)], seed=3)
    folder, _ = _write(tmp_path / "train", rgb, "JPEG")

    @flow.global_function(type="predict")
    def load() -> tuple[tp.Numpy, tp.Numpy]:
        ofrecord = flow.data.ofrecord_reader(folder, batch_size=4, data_part_num=1,
                                             part_name_suffix_length=-1,
                                             random_shuffle=True, shuffle_after_epoch=True)
        label = flow.data.OFRecordRawDecoder(ofrecord, "class/label", shape=(),
                                             dtype=flow.int32)
        encoded = flow.data.OFRecordBytesDecoder(ofrecord, "encoded")
        image = flow.data.ImageDecoderRandomCropResize(encoded, target_width=224,
                                                       target_height=224, num_workers=3)
        rng = flow.random.CoinFlip(batch_size=4)
        normal = flow.image.CropMirrorNormalize(image, mirror_blob=rng, color_space="RGB",
                                                mean=MEAN, std=STD, output_dtype=flow.float)
        return normal, label

    for _ in range(3):
        normal, label = load()
        assert normal.shape == (4, 3, 224, 224) and normal.dtype == np.float32
        assert set(label.tolist()) <= set(range(5))
        # back to pixels: whole numbers in 0..255, as the uint8 crops were
        pixels = normal * np.float32(STD)[:, None, None] + np.float32(MEAN)[:, None, None]
        np.testing.assert_allclose(pixels, np.rint(pixels), atol=1e-3)
        assert pixels.min() > -0.5 and pixels.max() < 255.5


def test_default_names_count_from_zero_and_seeds_repeat(tmp_path):
    folder, _ = _write(tmp_path / "jpeg", _images([(30, 40), (40, 30)], seed=4), "JPEG")
    names = []

    @flow.global_function(type="predict")
    def two() -> tuple[tp.Numpy, tp.Numpy]:
        records = flow.data.ofrecord_reader(folder, batch_size=2)
        encoded = flow.data.OFRecordBytesDecoder(records, "encoded")
        a = flow.data.ImageDecoderRandomCropResize(encoded, 8, 8, seed=1)
        b = flow.data.image_decoder_random_crop_resize(encoded, 8, 8, seed=1)
        names.extend([a.name, b.name])
        return a, b

    a, b = two()
    assert names == ["ImageDecoderRandomCropResize_0", "ImageDecoderRandomCropResize_1"]
    np.testing.assert_array_equal(a, b)      # one seed, one sequence of windows
    flow.clear_default_session()
    flow.random.seed(7)     # no seed given: the windows follow flow.random.seed's
    first = _crop_resize_job(folder, 2, 8, 8)()
    flow.clear_default_session()
    flow.random.seed(7)
    np.testing.assert_array_equal(_crop_resize_job(folder, 2, 8, 8)(), first)


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"random_area": (0.5,)}, ValueError,
     r"ImageDecoderRandomCropResize: random_area must be a \(low, high\) pair of numbers, "
     r"got \(0.5,\)"),
    ({"random_aspect_ratio": (0.5, 1.0, 2.0)}, ValueError,
     r"random_aspect_ratio must be a \(low, high\) pair of numbers, got \(0.5, 1.0, 2.0\)"),
    ({"random_area": (0.5, 1.5)}, ValueError,
     r"random_area must satisfy 0 < low <= high <= 1.0, got \(0.5, 1.5\)"),
    ({"target_width": 0}, ValueError, "target_width must be a positive int, got 0"),
    ({"target_height": -3}, ValueError, "target_height must be a positive int, got -3"),
    ({"target_height": 2.5}, ValueError, "target_height must be a positive int, got 2.5"),
    ({"num_attempts": 0}, ValueError, "num_attempts must be a positive int, got 0"),
    ({"num_workers": 0}, ValueError, "num_workers must be a positive int, got 0"),
    ({"seed": -1}, ValueError, "seed must be an int >= 0 or None, got -1"),
])
def test_bad_arguments_name_the_argument(tmp_path, kwargs, exc, match):
    folder, _ = _write(tmp_path / "d", _images([(8, 8)]), "PNG")
    args = {"target_width": 4, "target_height": 4, **kwargs}
    with pytest.raises(exc, match=match):
        _crop_resize_job(folder, 1, args.pop("target_width"), args.pop("target_height"),
                         **args)()


def test_input_must_be_the_bytes_decoders_blob(tmp_path):
    folder, _ = _write(tmp_path / "d", _images([(8, 8)]), "PNG")

    @flow.global_function(type="predict")
    def raw() -> tp.Numpy:
        records = flow.data.ofrecord_reader(folder, batch_size=1)
        label = flow.data.OFRecordRawDecoder(records, "class/label", shape=(8,),
                                             dtype=flow.uint8, auto_zero_padding=True)
        return flow.data.ImageDecoderRandomCropResize(label, 4, 4)

    with pytest.raises(TypeError, match=r"input_blob must be what flow.data.OFRecordBytes"
                                        r"Decoder returned .*got uint8 \(1, 8\) blob"):
        raw()
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def reader() -> tp.Numpy:
        records = flow.data.ofrecord_reader(folder, batch_size=1)
        return flow.data.ImageDecoderRandomCropResize(records, 4, 4)

    with pytest.raises(TypeError, match="got OFRecordBatch"):
        reader()


def test_bytes_read_by_other_ops_still_need_one_length(tmp_path):
    folder, encoded = _write(tmp_path / "jpeg", _images([(30, 40), (41, 29)]), "JPEG")
    assert len(encoded[0]) != len(encoded[1])

    @flow.global_function(type="predict")
    def both() -> tuple[tp.Numpy, tp.Numpy]:
        records = flow.data.ofrecord_reader(folder, batch_size=2)
        encoded = flow.data.OFRecordBytesDecoder(records, "encoded")
        image = flow.data.ImageDecoderRandomCropResize(encoded, 8, 8)
        return image, encoded    # the dense bytes are returned: they must be filled

    with pytest.raises(ValueError, match="holds .* bytes, the job was traced with .*"
                                         "ImageDecoderRandomCropResize takes encoded images"):
        both()


def test_a_value_that_is_not_an_image_names_its_record(tmp_path):
    ofrecord.write_ofrecord(tmp_path, [{"encoded": ofrecord.encode_image(
        np.zeros((8, 8, 3), np.uint8))}, {"encoded": b"not an image"}])
    with pytest.raises(ValueError, match="ImageDecoderRandomCropResize: record 1 of the "
                                         "batch: not an image"):
        _crop_resize_job(str(tmp_path), 2, 4, 4)()


@pytest.mark.parametrize("backend", ["strict", pytest.param("cupy", marks=pytest.mark.gpu)])
def test_a_device_backend_gets_the_numpy_backends_images(tmp_path, backend):
    """On a GPU (the strict backend stands in on the CPU) the images decoded on the host
    reach the device's ops, and the bytes blob nothing reads is staged as zeros."""
    from aioflow import backends

    folder, _ = _write(tmp_path / "jpeg", _images([(30, 40), (41, 29), (25, 25)]), "JPEG")

    def job_on(name):
        flow.clear_default_session()
        with backends.use(name):
            @flow.global_function(type="predict")
            def job() -> tp.Numpy:
                records = flow.data.ofrecord_reader(folder, batch_size=2, random_shuffle=True,
                                                    seed=3)
                encoded = flow.data.OFRecordBytesDecoder(records, "encoded")
                image = flow.data.ImageDecoderRandomCropResize(encoded, 16, 12, seed=4)
                return flow.image.CropMirrorNormalize(image, color_space="RGB", mean=MEAN,
                                                      std=STD, output_layout="NHWC")
            return np.stack([job() for _ in range(3)])

    reference, device = job_on("numpy"), job_on(backend)
    assert device.shape == (3, 2, 12, 16, 3)
    np.testing.assert_array_equal(device, reference)
