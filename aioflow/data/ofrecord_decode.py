"""Decoding a batch of OFRecord messages into one array per feature, as OneFlow's
``ofrecord_raw_decoder``, ``ofrecord_bytes_decoder`` and ``ofrecord_image_decoder``
kernels did (``user/kernels/ofrecord_decoder_kernels.cpp``), into dense arrays.

These run on the loader's thread, never on the compute thread. Images are decoded by
Pillow (PNG, JPEG, BMP, ... whatever it reads).
"""
from __future__ import annotations

import io

import numpy as np

from ..kernels.image import resize  # noqa: F401 - decode.resize, as the readers call it


class DecodeError(ValueError):
    """A record that does not decode to what the job was traced with."""


def feature_of(record, field: str, what: str):
    if field not in record.feature:
        raise DecodeError(f"{what}: field {field!r} not found in the record (it has "
                          f"{sorted(record.feature)})")
    return record.feature[field]


def raw(records, field: str, shape: tuple, dtype: np.dtype, auto_zero_padding: bool,
        what: str) -> np.ndarray:
    """``(len(records), *shape)`` of ``dtype``: each record's numbers, converted. A
    numeric list must hold exactly ``prod(shape)`` values (with ``auto_zero_padding``, at
    most that many, zeros after); a single bytes value gives its bytes as int8 numbers
    (OneFlow's cast), at most ``prod(shape)`` of them, zeros after."""
    count = int(np.prod(shape, dtype=np.int64))
    out = np.zeros((len(records), count), dtype)
    for row, record in zip(out, records):
        feature = feature_of(record, field, what)
        kind = feature.WhichOneof("kind")
        if kind == "bytes_list":
            data = one_bytes(feature, field, what)
            values = np.frombuffer(data, np.int8)[:count]
        elif kind is None:
            raise DecodeError(f"{what}: field {field!r} holds no value")
        else:
            values = np.asarray(getattr(feature, kind).value)
            if len(values) > count or (len(values) < count and not auto_zero_padding):
                raise DecodeError(
                    f"{what}: field {field!r} holds {len(values)} values, the decoder's "
                    f"shape {tuple(shape)} needs {count}"
                    + ("" if auto_zero_padding else " (auto_zero_padding=True pads fewer)"))
        with np.errstate(over="ignore", invalid="ignore"):
            row[:len(values)] = values.astype(dtype, copy=False)
    return out.reshape((len(records),) + tuple(shape))


def fixed_bytes(records, field: str, length: int, what: str) -> np.ndarray:
    """``(len(records), length)`` uint8: each record's single bytes value, which must be
    ``length`` bytes long."""
    out = np.empty((len(records), length), np.uint8)
    for row, record in zip(out, records):
        data = one_bytes(feature_of(record, field, what), field, what)
        if len(data) != length:
            raise DecodeError(f"{what}: field {field!r} holds {len(data)} bytes, the job was "
                              f"traced with {length} (aioflow's bytes decoder gives a dense "
                              "array: where the job reads it, every record's value must "
                              "have one length; flow.data.ImageDecoderRandomCropResize "
                              "takes encoded images of any length)")
        row[:] = np.frombuffer(data, np.uint8)
    return out


def decode_image(data: bytes, color_space: str, field: str, what: str) -> np.ndarray:
    """One encoded image as uint8 ``(H, W, C)``: C=3 in ``color_space`` order ("BGR", as
    OneFlow's OpenCV decoder gave, or "RGB"), or C=1 for "GRAY"."""
    from PIL import Image, UnidentifiedImageError
    try:
        with Image.open(io.BytesIO(data)) as image:
            pixels = np.asarray(image.convert("L" if color_space == "GRAY" else "RGB"))
    except (UnidentifiedImageError, OSError) as err:
        raise DecodeError(f"{what}: field {field!r} is not an image Pillow can decode "
                          f"({err})") from None
    if color_space == "GRAY":
        return pixels[:, :, None]
    return pixels[:, :, ::-1] if color_space == "BGR" else pixels


def images(records, field: str, color_space: str, shape: tuple, what: str) -> np.ndarray:
    """``(len(records), H, W, C)`` uint8; every image must decode to ``shape`` (H, W, C)."""
    out = np.empty((len(records),) + tuple(shape), np.uint8)
    for index, record in enumerate(records):
        pixels = decode_image(one_bytes(feature_of(record, field, what), field, what),
                              color_space, field, what)
        if pixels.shape != tuple(shape):
            raise DecodeError(
                f"{what}: field {field!r} decodes to an image of {pixels.shape}, the job was "
                f"traced with {tuple(shape)} (aioflow decodes into a dense batch: every image "
                "must have one size; flow.data.decode_ofrecord with an "
                "ImageResizePreprocessor resizes them)")
        out[index] = pixels
    return out


def one_bytes(feature, field: str, what: str) -> bytes:
    """The single bytes value of ``feature``; DecodeError naming ``field`` otherwise."""
    if feature.WhichOneof("kind") != "bytes_list" or len(feature.bytes_list.value) != 1:
        raise DecodeError(f"{what}: field {field!r} must hold one bytes value, got "
                          f"{feature.WhichOneof('kind')}")
    return feature.bytes_list.value[0]
