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
from ..ir import current_graph
from . import ofrecord_decode as decode
from .ofrecord import part_paths
from .ofrecord_stream import ReaderBatch, RecordStream
from .._core import seeds
from ..kernels.image import crop_range, random_crop_window
from ..ops.tensor_buffer import object_array

__all__ = ["ofrecord_reader", "ofrecord_loader", "OFRecordRawDecoder",
           "ofrecord_raw_decoder", "OFRecordBytesDecoder", "ofrecord_bytes_decoder",
           "OFRecordImageDecoder", "ofrecord_image_decoder",
           "OFRecordImageDecoderRandomCrop", "ofrecord_image_decoder_random_crop",
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
    length; aioflow's blobs are dense, so every record's value must have the length of
    the first record's (read when the job is traced)."""
    what = "flow.data.OFRecordBytesDecoder"
    _check_batch(what, input_blob)
    field = _field(what, blob_name)
    first = decode.feature_of(input_blob.stream.first_record(), field, what)
    length = len(decode.one_bytes(first, field, what))

    def run(records):
        return decode.fixed_bytes(records, field, length, what)
    return input_blob.source.add_field(run, (input_blob.batch_size, length), dtypes.uint8,
                                       name or field)


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
    if isinstance(num_attempts, bool) or not isinstance(num_attempts, (int, np.integer)) \
            or num_attempts < 1:
        raise ValueError(f"{what}: num_attempts must be a positive int, got {num_attempts!r}")
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
                                                int(num_attempts), rng)
            crops.append(np.ascontiguousarray(image[y:y + h, x:x + w]))
        return object_array(crops)
    return input_blob.source.add_field(run, (input_blob.batch_size,), dtypes.tensor_buffer,
                                       name or field)


ofrecord_image_decoder_random_crop = OFRecordImageDecoderRandomCrop


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
