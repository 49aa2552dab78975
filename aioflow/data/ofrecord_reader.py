"""``flow.data.ofrecord_reader`` and its decoders: OneFlow's OFRecord data sets read inside
a job, one batch per step.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> from typing import Tuple
>>> folder = "reader_example"        # a new folder in the current directory
>>> _ = flow.data.ofrecord.write_ofrecord(folder, [
...     {"x": np.full(3, i, np.float32), "label": np.int32(i % 2)} for i in range(4)])
>>> @flow.global_function(type="predict")
... def read_job() -> Tuple[tp.Numpy, tp.Numpy]:
...     records = flow.data.ofrecord_reader(folder, batch_size=2)
...     x = flow.data.OFRecordRawDecoder(records, "x", shape=(3,), dtype=flow.float)
...     label = flow.data.OFRecordRawDecoder(records, "label", shape=(), dtype=flow.int32)
...     return x * 10, label
>>> read_job()[0]
array([[ 0.,  0.,  0.],
       [10., 10., 10.]], dtype=float32)
>>> read_job()[1], read_job()[1]        # the stream goes on, and starts over
(array([0, 1], dtype=int32), array([0, 1], dtype=int32))
"""
from __future__ import annotations

import warnings

import numpy as np

from .._core import dtypes
from .._core.callsite import user_stacklevel
from ..ir import Blob, current_graph
from . import ofrecord_decode as decode
from .ofrecord import part_paths
from .ofrecord_stream import ReaderBatch, RecordStream
from .._core import seeds
from ..kernels.image import crop_range, decode_random_crop_resize, random_crop_window
from ..ops.tensor_buffer import object_array
from .job_feeds import bytes_field_of

__all__ = ["ofrecord_reader", "ofrecord_loader", "OFRecordRawDecoder",
           "ofrecord_raw_decoder", "OFRecordBytesDecoder", "ofrecord_bytes_decoder",
           "OFRecordImageDecoder", "ofrecord_image_decoder",
           "OFRecordImageDecoderRandomCrop", "ofrecord_image_decoder_random_crop",
           "ImageDecoderRandomCropResize", "image_decoder_random_crop_resize",
           "ofrecord_image_classification_reader", "OFRecordBatch"]

_COLOR_SPACES = ("BGR", "RGB", "GRAY")


class OFRecordBatch(ReaderBatch):
    """What ``ofrecord_reader`` returns inside a job: each step, ``batch_size`` records of
    the data set. Not a blob: give it to the decoders, which return blobs."""

    reader = "flow.data.ofrecord_reader"
    dtype = dtypes.record   # as OneFlow's reader blob: one OFRecord per element


def ofrecord_reader(ofrecord_dir: str, batch_size: int = 1, data_part_num: int = 1,
                    part_name_prefix: str = "part-", part_name_suffix_length: int = -1,
                    random_shuffle: bool = False, shuffle_buffer_size: int = 1024,
                    shuffle_after_epoch: bool = False, name: str | None = None, *,
                    seed: int | None = None) -> OFRecordBatch:
    """The records of the OFRecord data set in ``ofrecord_dir``, ``batch_size`` per step of
    the job, for the decoders (``OFRecordRawDecoder``, ...).

    The part files ``<prefix><index>`` (index zero-padded to ``part_name_suffix_length``
    digits; -1: none) for index 0 to ``data_part_num - 1`` are read in order, endlessly.
    ``random_shuffle`` draws records at random from a buffer of ``shuffle_buffer_size``;
    ``shuffle_after_epoch`` reads the part files in a new order each epoch; ``seed``
    (aioflow's addition; default from ``flow.random.seed``) makes both reproducible.
    Reading and decoding run on a background loader thread, ahead of the steps.
    FileNotFoundError names a missing part file.
    """
    graph = current_graph()
    what = "flow.data.ofrecord_reader"
    if not isinstance(ofrecord_dir, str) or not ofrecord_dir:
        raise TypeError(f"{what}: ofrecord_dir must be a non-empty str, got {ofrecord_dir!r}")
    paths = part_paths(ofrecord_dir, data_part_num, part_name_prefix, part_name_suffix_length)
    stream = RecordStream(paths, batch_size, random_shuffle, shuffle_buffer_size,
                          shuffle_after_epoch, seed, what)
    return OFRecordBatch(graph, stream, name or graph.unique_name("OFRecord_Reader"))


def ofrecord_loader(ofrecord_dir: str, batch_size: int = 1, data_part_num: int = 1,
                    part_name_prefix: str = "part-", part_name_suffix_length: int = -1,
                    shuffle: bool = False, shuffle_buffer_size: int = 1024,
                    name: str | None = None) -> OFRecordBatch:
    """Deprecated in OneFlow: ``ofrecord_reader`` with ``random_shuffle=shuffle``."""
    warnings.warn("flow.data.ofrecord_loader is deprecated: use flow.data.ofrecord_reader",
                  DeprecationWarning, stacklevel=user_stacklevel())
    return ofrecord_reader(ofrecord_dir, batch_size, data_part_num, part_name_prefix,
                           part_name_suffix_length, random_shuffle=shuffle,
                           shuffle_buffer_size=shuffle_buffer_size, name=name)


def OFRecordRawDecoder(input_blob: OFRecordBatch, blob_name: str, shape, dtype,  # noqa: N802
                       dim1_varying_length: bool = False, auto_zero_padding: bool = False,
                       name: str | None = None):
    """A blob ``(batch_size, *shape)`` of ``dtype``: feature ``blob_name`` of each record.

    A numeric feature (float, double, int32 or int64 list) must hold ``prod(shape)``
    values, converted to ``dtype``; with ``auto_zero_padding`` fewer are padded with zeros.
    A bytes feature gives its bytes as int8 numbers (OneFlow's cast; use ``dtype=flow.uint8``
    for 0..255), zeros after. ``dim1_varying_length`` (OneFlow's dynamic shapes) raises
    NotImplementedError.
    """
    what = "flow.data.OFRecordRawDecoder"
    _check_batch(what, input_blob)
    if dim1_varying_length:
        raise NotImplementedError(f"{what}: dim1_varying_length needs dynamic shapes, which "
                                  "aioflow does not have; use auto_zero_padding=True")
    shape = _shape(what, shape)
    dtype = dtypes.convert(dtype)
    field = _field(what, blob_name)

    def run(records):
        return decode.raw(records, field, shape, dtype.numpy, auto_zero_padding, what)
    return input_blob.source.add_field(run, (input_blob.batch_size,) + shape, dtype,
                                       name or field)


ofrecord_raw_decoder = OFRecordRawDecoder


def OFRecordBytesDecoder(input_blob: OFRecordBatch, blob_name: str,  # noqa: N802
                         name: str | None = None):
    """A uint8 blob ``(batch_size, length)``: the single bytes value of feature
    ``blob_name`` of each record. OneFlow returned a tensor buffer of values of any
    length; aioflow's blobs are dense, so where the job reads this blob every record's
    value must have the length of the first record's (read when the job is traced).
    ``ImageDecoderRandomCropResize`` takes it as OneFlow's tensor buffer: it reads each
    value whole, of any length (encoded images), and a blob only it reads is never
    filled."""
    what = "flow.data.OFRecordBytesDecoder"
    _check_batch(what, input_blob)
    field = _field(what, blob_name)
    first = decode.feature_of(input_blob.stream.first_record(), field, what)
    length = len(decode.one_bytes(first, field, what))

    def run(records):
        return decode.fixed_bytes(records, field, length, what)

    def record_bytes(record) -> bytes:
        return decode.one_bytes(decode.feature_of(record, field, what), field, what)
    return input_blob.source.add_bytes_field(run, (input_blob.batch_size, length),
                                             dtypes.uint8, name or field, record_bytes)


ofrecord_bytes_decoder = OFRecordBytesDecoder


def OFRecordImageDecoder(input_blob: OFRecordBatch, blob_name: str,  # noqa: N802
                         color_space: str = "BGR", name: str | None = None):
    """A uint8 blob ``(batch_size, H, W, C)``: feature ``blob_name`` of each record (an
    encoded image: PNG, JPEG, ...) decoded by Pillow, channels in ``color_space`` order
    ("BGR", OneFlow's default, "RGB"; "GRAY" gives C=1). OneFlow returned a tensor buffer
    of images of any size; aioflow's blobs are dense, so every image must have the size
    of the first record's (read when the job is traced)."""
    what = "flow.data.OFRecordImageDecoder"
    _check_batch(what, input_blob)
    field = _field(what, blob_name)
    color_space = _color_space(what, color_space)
    shape = _first_image_shape(input_blob, field, color_space, what)

    def run(records):
        return decode.images(records, field, color_space, shape, what)
    return input_blob.source.add_field(run, (input_blob.batch_size,) + shape, dtypes.uint8,
                                       name or field)


ofrecord_image_decoder = OFRecordImageDecoder


def OFRecordImageDecoderRandomCrop(input_blob: OFRecordBatch, blob_name: str,  # noqa: N802
                                   color_space: str = "BGR", num_attempts: int = 10,
                                   seed: int | None = None,
                                   random_area=(0.08, 1.0),
                                   random_aspect_ratio=(0.75, 1.333333),
                                   name: str = "OFRecordImageDecoderRandomCrop"):
    """A tensor buffer ``(batch_size,)``: feature ``blob_name`` of each record decoded (as
    ``OFRecordImageDecoder``) and cropped to a random window, each an (h, w, C) uint8
    image, as OneFlow's ``RandomCropGenerator`` draws it: an area fraction uniform in
    ``random_area`` and an aspect ratio (w/h) log-uniform in ``random_aspect_ratio``,
    ``num_attempts`` tries to fit, else the whole image brought within the ratio; the
    window's corner uniform. ``seed`` (else ``flow.random.seed``'s sequence) makes the
    windows reproducible. Follow it with ``flow.image.Resize`` to get a dense batch."""
    what = "flow.data.OFRecordImageDecoderRandomCrop"
    _check_batch(what, input_blob)
    field = _field(what, blob_name)
    color_space = _color_space(what, color_space)
    num_attempts = _positive_int(what, "num_attempts", num_attempts)
    area = crop_range(what, "random_area", random_area, upper=1.0)
    ratio = crop_range(what, "random_aspect_ratio", random_aspect_ratio)
    rng = np.random.default_rng(seeds.loader_seed() if seed is None else seed)

    def run(records):
        crops = []
        for record in records:
            feature = decode.feature_of(record, field, what)
            image = decode.decode_image(decode.one_bytes(feature, field, what), color_space,
                                        field, what)
            (y, x), (h, w) = random_crop_window(image.shape[:2], area, ratio,
                                                num_attempts, rng)
            crops.append(np.ascontiguousarray(image[y:y + h, x:x + w]))
        return object_array(crops)
    return input_blob.source.add_field(run, (input_blob.batch_size,), dtypes.tensor_buffer,
                                       name or field)


ofrecord_image_decoder_random_crop = OFRecordImageDecoderRandomCrop


def ImageDecoderRandomCropResize(input_blob, target_width: int, target_height: int,  # noqa: N802
                                 num_attempts: int | None = None, seed: int | None = None,
                                 random_area=None, random_aspect_ratio=None,
                                 num_workers: int | None = None,
                                 warmup_size: int | None = None,
                                 max_num_pixels: int | None = None,
                                 name: str | None = None):
    """A uint8 blob ``(batch_size, target_height, target_width, 3)``, RGB: each record's
    encoded image (``input_blob``, what ``OFRecordBytesDecoder`` returned; JPEG, PNG, ...
    of any size) decoded, cropped to a random window and resized to the target size,
    bilinear, as OneFlow's op (``image_decoder_random_crop_resize_kernel.cpp``).

    The window is drawn as OneFlow's ``RandomCropGenerator`` draws it: an area fraction
    uniform in ``random_area`` (default (0.08, 1.0)) and an aspect ratio (w/h) log-uniform
    in ``random_aspect_ratio`` (default (0.75, 1.333333)), ``num_attempts`` (default 10)
    tries to fit; when none fits, the whole image brought within the ratio range and the
    area's upper bound (not centred: its corner is drawn too). New windows every step;
    ``seed`` fixes their sequence (else ``flow.random.seed``'s, else fresh entropy).
    OneFlow gave each batch slot a generator of its own: the windows here follow the same
    rule from one numpy generator, not OneFlow's numbers. Decoding, cropping and resizing
    run on the reader's loader thread, ahead of the steps; ``num_workers``,
    ``warmup_size`` and ``max_num_pixels`` tuned OneFlow's decoder threads and GPU
    buffers: checked, no effect. ``name`` defaults to ``ImageDecoderRandomCropResize_<n>``.

    >>> import numpy as np, aioflow as flow, aioflow.typing as tp
    >>> from aioflow.data import ofrecord
    >>> rng = np.random.default_rng(0)
    >>> folder = "crop_resize_example"        # a new folder in the current directory
    >>> _ = ofrecord.write_ofrecord(folder, [{"encoded": ofrecord.encode_image(
    ...     rng.integers(0, 256, (h, w, 3), dtype=np.uint8), "JPEG")}
    ...     for h, w in [(40, 60), (64, 48)]])
    >>> @flow.global_function(type="predict")
    ... def crops() -> tp.Numpy:
    ...     records = flow.data.ofrecord_reader(folder, batch_size=2)
    ...     encoded = flow.data.OFRecordBytesDecoder(records, "encoded")
    ...     return flow.data.ImageDecoderRandomCropResize(encoded, target_width=32,
    ...                                                   target_height=24, seed=1)
    >>> crops().shape, crops().dtype
    ((2, 24, 32, 3), dtype('uint8'))
    """
    what = "flow.data.ImageDecoderRandomCropResize"
    found = bytes_field_of(input_blob)
    if found is None:
        raise TypeError(
            f"{what}: input_blob must be what flow.data.OFRecordBytesDecoder returned (a "
            "reader's encoded images), got "
            + (f"{input_blob.dtype.name} {input_blob.shape} blob {input_blob.name!r}"
               if isinstance(input_blob, Blob) else type(input_blob).__name__)
            + "; for a tensor buffer of encoded images use flow.image.decode, then "
            "flow.image.random_crop and flow.image.Resize")
    source, record_bytes = found
    width = _positive_int(what, "target_width", target_width)
    height = _positive_int(what, "target_height", target_height)
    attempts = 10 if num_attempts is None else _positive_int(what, "num_attempts",
                                                             num_attempts)
    for arg, value in (("num_workers", num_workers), ("warmup_size", warmup_size),
                       ("max_num_pixels", max_num_pixels)):
        if value is not None:
            _positive_int(what, arg, value)
    area = crop_range(what, "random_area", (0.08, 1.0) if random_area is None
                      else random_area, upper=1.0)
    ratio = crop_range(what, "random_aspect_ratio", (0.75, 1.333333)
                       if random_aspect_ratio is None else random_aspect_ratio)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                             or seed < 0):
        raise ValueError(f"{what}: seed must be an int >= 0 or None, got {seed!r}")
    rng = np.random.default_rng(seeds.loader_seed() if seed is None else int(seed))
    batch = input_blob.shape[0]

    def run(records):
        out = np.empty((len(records), height, width, 3), np.uint8)
        for index, record in enumerate(records):
            data = record_bytes(record)
            try:
                out[index] = decode_random_crop_resize(data, width, height, area, ratio,
                                                       attempts, rng)
            except ValueError as err:
                raise decode.DecodeError(f"{what}: record {index} of the batch: {err}"
                                         ) from None
        return out
    label = name or _numbered(source.graph, "ImageDecoderRandomCropResize_")
    return source.add_field(run, (batch, height, width, 3), dtypes.uint8, label)


image_decoder_random_crop_resize = ImageDecoderRandomCropResize


def ofrecord_image_classification_reader(
        ofrecord_dir: str, image_feature_name: str, label_feature_name: str,
        batch_size: int = 1, data_part_num: int = 1, part_name_prefix: str = "part-",
        part_name_suffix_length: int = -1, random_shuffle: bool = False,
        shuffle_buffer_size: int = 1024, shuffle_after_epoch: bool = False,
        color_space: str = "BGR", decode_buffer_size_per_thread: int = 32,
        num_decode_threads_per_machine: int | None = None, name: str | None = None):
    """``(image, label)``: a reader and its image decoder in one, as OneFlow's: images
    uint8 ``(batch_size, H, W, C)`` (see ``OFRecordImageDecoder``), labels int32
    ``(batch_size,)`` from a one-number feature. ``decode_buffer_size_per_thread`` and
    ``num_decode_threads_per_machine`` tuned OneFlow's decoding threads: accepted, no
    effect (one loader thread decodes here)."""
    records = ofrecord_reader(ofrecord_dir, batch_size, data_part_num, part_name_prefix,
                              part_name_suffix_length, random_shuffle, shuffle_buffer_size,
                              shuffle_after_epoch, name)
    image = OFRecordImageDecoder(records, image_feature_name, color_space)
    label = OFRecordRawDecoder(records, label_feature_name, (), dtypes.int32)
    return image, label


# -- checks ---------------------------------------------------------------------------------
def _check_batch(what: str, value) -> None:
    if not isinstance(value, OFRecordBatch):
        raise TypeError(f"{what}: input_blob must be what flow.data.ofrecord_reader returned, "
                        f"got {type(value).__name__}")


def _positive_int(what: str, arg: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{what}: {arg} must be a positive int, got {value!r}")
    return int(value)


def _numbered(graph, prefix: str) -> str:
    """``prefix`` and a number from 0, the next for this prefix in this job (OneFlow's
    ``id_util.UniqueStr`` named its ops so, counting over the process)."""
    count = graph.unique_name(prefix)          # prefix, prefix_1, prefix_2, ...
    return prefix + ("0" if count == prefix else count.rsplit("_", 1)[1])


def _field(what: str, blob_name) -> str:
    if not isinstance(blob_name, str) or not blob_name:
        raise TypeError(f"{what}: blob_name must be a feature name (a non-empty str), got "
                        f"{blob_name!r}")
    return blob_name


def _shape(what: str, shape) -> tuple:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d > 0
            for d in shape):
        raise ValueError(f"{what}: shape must be a tuple of positive ints, got {shape!r}")
    return tuple(int(d) for d in shape)


def _color_space(what: str, color_space) -> str:
    if not isinstance(color_space, str) or color_space.upper() not in _COLOR_SPACES:
        raise ValueError(f"{what}: color_space must be one of {_COLOR_SPACES}, got "
                         f"{color_space!r}")
    return color_space.upper()


def _first_image_shape(batch: OFRecordBatch, field: str, color_space: str, what: str) -> tuple:
    feature = decode.feature_of(batch.stream.first_record(), field, what)
    data = decode.one_bytes(feature, field, what)
    return decode.decode_image(data, color_space, field, what).shape
