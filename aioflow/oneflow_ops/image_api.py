"""``flow.image``: OneFlow v0.3.4's image preprocessing for its data pipelines (the
ImageNet scripts' ``Resize`` and ``CropMirrorNormalize`` after
``flow.data.OFRecordImageDecoderRandomCrop``; the detection scripts' ``decode``,
``target_resize``, ``flip``, ``normalize`` and ``batch_align``), on batches of HWC images
(uint8, or float32 where OneFlow takes them): a tensor buffer of images of any size, or a
dense uint8 ``(batch, H, W, C)`` Blob for ``Resize`` and ``CropMirrorNormalize``.
Resizing, decoding and filling are OpenCV's functions, as in OneFlow's kernels
(:mod:`aioflow.kernels.image`).
"""
from __future__ import annotations

import numbers
import warnings

from .._core import dtypes
from .._core.callsite import user_stacklevel
from ..ir import Blob
from ..kernels.image import INTERPOLATIONS as _INTERPOLATIONS
from ..kernels.image import crop_range as _crop_range
from ..ops import image_ops as _ops
from .tensor_buffer_api import _require_buffer

__all__ = ["Resize", "resize", "CropMirrorNormalize", "crop_mirror_normalize",
           "target_resize", "decode", "flip", "normalize", "batch_align", "random_crop"]

_CHANNELS = {"BGR": 3, "RGB": 3, "GRAY": 1}


def _images(what, image):
    if not isinstance(image, Blob):
        raise TypeError(f"{what}: image must be a Blob, got {type(image).__name__}")
    _ops.check_images(what, image)


def _positive_int(what, arg, value, allow_zero=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or \
            value < (0 if allow_zero else 1):
        raise ValueError(f"{what}: {arg} must be a {'non-negative' if allow_zero else 'positive'}"
                         f" int, got {value!r}")
    return int(value)


def Resize(image, target_size=None, min_size=None, max_size=None,  # noqa: N802
           keep_aspect_ratio=False, resize_side="shorter", channels=3, dtype=None,
           interpolation_type="auto", name=None, color_space=None, interp_type=None,
           resize_shorter=0, resize_x=0, resize_y=0):
    """OneFlow's ``flow.image.Resize``. ``keep_aspect_ratio=False``: every image to
    ``target_size = (width, height)``; returns ``(images (B, height, width, channels),
    scales (B, 2) float32 as (w, h) factors, None)``. ``keep_aspect_ratio=True``: the
    ``resize_side`` side to the int ``target_size`` (``max_size`` / ``min_size`` bound the
    other); returns ``(tensor buffer of images, scales, sizes (B, 2) int32 as (w, h))``.
    The deprecated ``resize_x``/``resize_y`` (fixed size) and ``resize_shorter`` return
    the images alone and warn, as OneFlow printed. Interpolation: bilinear (Pillow)."""
    what = "flow.image.Resize"
    _images(what, image)
    deprecated = bool(resize_x or resize_y or resize_shorter or color_space or interp_type)
    if deprecated:
        warnings.warn(f"{what}: color_space, interp_type, resize_shorter, resize_x and "
                      "resize_y are deprecated (OneFlow's words): use channels, "
                      "interpolation_type, target_size and resize_side",
                      DeprecationWarning, stacklevel=user_stacklevel())
    if color_space is not None:
        if str(color_space).upper() not in _CHANNELS:
            raise ValueError(f"{what}: color_space must be one of {tuple(_CHANNELS)}, got "
                             f"{color_space!r}")
        channels = _CHANNELS[str(color_space).upper()]
    if resize_x or resize_y:
        target_size = (_positive_int(what, "resize_x", resize_x),
                       _positive_int(what, "resize_y", resize_y))
        keep_aspect_ratio = False
    if resize_shorter:
        target_size = _positive_int(what, "resize_shorter", resize_shorter)
        keep_aspect_ratio, resize_side = True, "shorter"
    if interp_type is not None:
        names = {"Linear": "bilinear", "NN": "nearest_neighbor", "Cubic": "bicubic"}
        if interp_type not in names:
            raise ValueError(f"{what}: interp_type must be one of {tuple(names)}, got "
                             f"{interp_type!r}")
        interpolation_type = names[interp_type]
    if interpolation_type not in _INTERPOLATIONS:
        raise ValueError(f"{what}: interpolation_type must be one of {_INTERPOLATIONS}, "
                         f"got {interpolation_type!r}")
    if keep_aspect_ratio:
        target = _positive_int(what, "target_size (an int when keep_aspect_ratio is True)",
                               target_size)
        if resize_side not in ("shorter", "longer"):
            raise ValueError(f'{what}: resize_side must be "shorter" or "longer", got '
                             f"{resize_side!r}")
        out, sizes, scales = _ops.image_resize_keep_aspect_ratio_op(
            image, target_size=target,
            min_size=_positive_int(what, "min_size", min_size or 0, allow_zero=True),
            max_size=_positive_int(what, "max_size", max_size or 0, allow_zero=True),
            resize_longer=resize_side == "longer", interpolation=interpolation_type,
            name=name)
        return out if deprecated else (out, scales, sizes)
    if not isinstance(target_size, (tuple, list)) or len(target_size) != 2:
        raise ValueError(f"{what}: target_size must be (width, height) when "
                         f"keep_aspect_ratio is False, got {target_size!r}")
    width, height = (_positive_int(what, "target_size", v) for v in target_size)
    channels = _positive_int(what, "channels", channels)
    if image.dtype == dtypes.uint8 and image.shape[3] != channels:
        raise ValueError(f"{what}: the images have {image.shape[3]} channels, channels is "
                         f"{channels}")
    out, scales = _ops.image_resize_to_fixed_op(
        image, width=width, height=height, channels=channels,
        dtype=dtypes.uint8 if dtype is None else _image_dtype(what, dtype),
        interpolation=interpolation_type, name=name)
    return out if deprecated else (out, scales, None)


resize = Resize


def CropMirrorNormalize(input_blob, mirror_blob=None, color_space="BGR",  # noqa: N802
                        output_layout="NCHW", crop_h=0, crop_w=0, crop_pos_y=0.5,
                        crop_pos_x=0.5, mean=(0.0,), std=(1.0,), output_dtype=dtypes.float,
                        name=None):
    """OneFlow's ``flow.image.CropMirrorNormalize``: from each image a ``crop_h x crop_w``
    window (0: the whole side) at ``crop_pos_y``/``crop_pos_x`` (0 top/left, 1
    bottom/right), flipped left-right where ``mirror_blob`` (int8 ``(B,)``, e.g.
    ``flow.random.CoinFlip``) is non-zero, then ``(x - mean) / std`` per channel (one
    value, or one per channel); ``output_layout`` "NCHW" or "NHWC"."""
    what = "flow.image.CropMirrorNormalize"
    _images(what, input_blob)
    if str(color_space).upper() not in _CHANNELS:
        raise ValueError(f"{what}: color_space must be one of {tuple(_CHANNELS)}, got "
                         f"{color_space!r}")
    if output_layout not in ("NCHW", "NHWC"):
        raise ValueError(f'{what}: output_layout must be "NCHW" or "NHWC", got '
                         f"{output_layout!r}")
    crop_h = _positive_int(what, "crop_h", crop_h, allow_zero=True)
    crop_w = _positive_int(what, "crop_w", crop_w, allow_zero=True)
    for arg, value in (("crop_pos_y", crop_pos_y), ("crop_pos_x", crop_pos_x)):
        if not isinstance(value, numbers.Real) or not 0.0 <= value <= 1.0:
            raise ValueError(f"{what}: {arg} must lie in [0, 1], got {value!r}")
    mean, std = [float(v) for v in mean], [float(v) for v in std]
    if not mean or not std or any(v == 0 for v in std):
        raise ValueError(f"{what}: mean and std must be non-empty and std non-zero, got "
                         f"{mean!r} and {std!r}")
    channels = _CHANNELS[str(color_space).upper()]
    if input_blob.dtype == dtypes.uint8 and input_blob.shape[3] != channels:
        raise ValueError(f"{what}: the images have {input_blob.shape[3]} channels, "
                         f"color_space {color_space!r} has {channels}")
    for arg, values in (("mean", mean), ("std", std)):
        if len(values) not in (1, channels):
            raise ValueError(f"{what}: {arg} must hold 1 or {channels} values, got "
                             f"{len(values)}")
    mirror = ()
    if mirror_blob is not None:
        if not isinstance(mirror_blob, Blob) or mirror_blob.dtype not in (
                dtypes.int8, dtypes.int32, dtypes.uint8):
            raise TypeError(f"{what}: mirror_blob must be an int8 Blob (flow.random.CoinFlip"
                            f"'s), got {getattr(mirror_blob, 'dtype', type(mirror_blob))}")
        mirror = (mirror_blob,)
    return _ops.crop_mirror_normalize_op(
        input_blob, *mirror, crop_h=crop_h, crop_w=crop_w, crop_pos_y=float(crop_pos_y),
        crop_pos_x=float(crop_pos_x), mean=tuple(mean), std=tuple(std), channels=channels,
        channels_first=output_layout == "NCHW", dtype=dtypes.convert(output_dtype),
        name=name)


crop_mirror_normalize = CropMirrorNormalize


def _image_dtype(what, dtype):
    """uint8 or float32: the image dtypes of OneFlow's image kernels."""
    converted = dtypes.convert(dtype)
    if converted not in (dtypes.uint8, dtypes.float32):
        raise ValueError(f"{what}: dtype must be flow.uint8 or flow.float32, got "
                         f"flow.{converted.name}")
    return converted


def _buffer(what, arg, blob):
    _require_buffer(blob, what, arg)
    if blob.ndim != 1:
        raise ValueError(f"{what}: {arg} must be a tensor buffer of shape (batch,), got "
                         f"{blob.shape}")


def target_resize(images, target_size, min_size=None, max_size=None, resize_side="shorter",
                  interpolation_type="auto", name=None):
    """OneFlow's ``flow.image.target_resize``: ``Resize`` keeping the aspect ratio, its
    results reordered: ``(tensor buffer of images, sizes (B, 2) int32 as (w, h), scales
    (B, 2) float32)``."""
    out, scales, sizes = Resize(images, target_size=target_size, min_size=min_size,
                                max_size=max_size, keep_aspect_ratio=True,
                                resize_side=resize_side,
                                interpolation_type=interpolation_type, name=name)
    return out, sizes, scales


def decode(images_bytes_buffer, dtype=dtypes.uint8, color_space="BGR", name=None):
    """OneFlow's ``flow.image.decode``: each element of a tensor buffer of encoded bytes
    (int8 or uint8; JPEG, PNG, ...) decoded to an ``(H, W, C)`` image of ``dtype`` (uint8
    or float32): C=3 in ``color_space`` order ("BGR" or "RGB"), C=1 for "GRAY"."""
    what = "flow.image.decode"
    _buffer(what, "images_bytes_buffer", images_bytes_buffer)
    if str(color_space).upper() not in _CHANNELS:
        raise ValueError(f"{what}: color_space must be one of {tuple(_CHANNELS)}, got "
                         f"{color_space!r}")
    return _ops.image_decode_op(images_bytes_buffer, color_space=str(color_space).upper(),
                                dtype=_image_dtype(what, dtype), name=name)


def _flip_code(what, flip_code, batch):
    """``(extra inputs, attrs)`` for a flip op: a Blob of codes, or one int for all."""
    if isinstance(flip_code, Blob):
        if flip_code.shape[:1] != (batch,) or flip_code.dtype.numpy.kind not in "iu":
            raise ValueError(f"{what}: flip_code must be an int or an integer Blob of shape "
                             f"({batch},), got {flip_code.dtype.name} {flip_code.shape}")
        return (flip_code,), {}
    if isinstance(flip_code, bool) or not isinstance(flip_code, numbers.Integral) \
            or not 0 <= flip_code <= 127:
        raise ValueError(f"{what}: flip_code must be 0, 1 (left-right), 16 (upside down) or "
                         f"17 (both), or a Blob of them, got {flip_code!r}")
    return (), {"code": int(flip_code)}


def flip(image, flip_code, name=None):
    """OneFlow's ``flow.image.flip``: each image of a tensor buffer flipped by its code
    (an int for all, or an int8 Blob ``(batch,)``): 1 (0x01) left-right, 16 (0x10) upside
    down, 17 both, 0 neither."""
    what = "flow.image.flip"
    _buffer(what, "image", image)
    extra, attrs = _flip_code(what, flip_code, image.shape[0])
    return _ops.image_flip_op(image, *extra, **attrs, name=name)


def random_crop(input_blob, num_attempts=10, seed=None, random_area=None,
                random_aspect_ratio=None, name="ImageRandomCrop"):
    """OneFlow's ``flow.image.random_crop``: each image of a tensor buffer cropped to a
    random window, as ``flow.data.OFRecordImageDecoderRandomCrop`` crops while decoding:
    an area fraction uniform in ``random_area`` (default (0.08, 1.0)) and an aspect ratio
    (w/h) log-uniform in ``random_aspect_ratio`` (default (0.75, 1.333333)),
    ``num_attempts`` tries to fit, the corner uniform. New windows every step; ``seed``
    fixes their sequence (else ``flow.random.seed``'s).

    >>> import numpy as np, aioflow as flow, aioflow.typing as tp
    >>> @flow.global_function(type="predict")
    ... def crops(images: tp.ListListNumpy.Placeholder((2, 32, 48, 3), dtype=flow.uint8)
    ...           ) -> tp.ListListNumpy:
    ...     buffer = flow.tensor_list_to_tensor_buffer(images)
    ...     cropped = flow.image.random_crop(buffer, seed=1)
    ...     return flow.tensor_buffer_to_tensor_list(cropped, shape=(32, 48, 3),
    ...                                              dtype=flow.uint8)
    >>> out = crops([[np.zeros((1, 32, 48, 3), np.uint8), np.ones((1, 30, 40, 3), np.uint8)]])
    >>> [a.shape[1] <= 32 and a.shape[2] <= 48 for a in out[0]]
    [True, True]
    >>> flow.clear_default_session()
    """
    what = "flow.image.random_crop"
    _buffer(what, "input_blob", input_blob)
    num_attempts = _positive_int(what, "num_attempts", num_attempts)
    area = _crop_range(what, "random_area",
                       (0.08, 1.0) if random_area is None else random_area, upper=1.0)
    ratio = _crop_range(what, "random_aspect_ratio",
                        (0.75, 1.333333) if random_aspect_ratio is None
                        else random_aspect_ratio)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise TypeError(f"{what}: seed must be an int or None, got {seed!r}")
    return _ops.image_random_crop_op(input_blob, num_attempts=num_attempts,
                                     seed=None if seed is None else int(seed),
                                     random_area=area, random_aspect_ratio=ratio, name=name)


def normalize(image, std, mean, name=None):
    """OneFlow's ``flow.image.normalize``: ``(x - mean[c]) / std[c]`` for each channel c of
    each float32 image of a tensor buffer (one value of ``std`` and ``mean`` a channel)."""
    what = "flow.image.normalize"
    _buffer(what, "image", image)
    if not isinstance(std, (list, tuple)) or not isinstance(mean, (list, tuple)):
        raise TypeError(f"{what}: std and mean must be lists or tuples, got "
                        f"{type(std).__name__} and {type(mean).__name__}")
    if len(std) != len(mean) or not std or any(float(v) == 0 for v in std):
        raise ValueError(f"{what}: std and mean must hold one value per channel, std "
                         f"non-zero; got {std!r} and {mean!r}")
    return _ops.image_normalize_op(image, std=tuple(float(v) for v in std),
                                   mean=tuple(float(v) for v in mean), name=name)


def batch_align(images, shape, dtype, alignment, name=None):
    """OneFlow's ``flow.image.batch_align``: the images of a tensor buffer in one dense
    ``(batch, H, W, C)`` Blob of ``dtype``, each at the top left, zeros elsewhere; H and W
    are the batch's largest height and width rounded up to a multiple of ``alignment``.
    ``shape`` (H, W, C) is the static maximum: as in OneFlow the result is a dynamic blob
    of the actual size, for the job to return (``tp.ListNumpy``)."""
    what = "flow.image.batch_align"
    _buffer(what, "images", images)
    if not isinstance(shape, (list, tuple)) or len(shape) != 3 or not all(
            isinstance(d, numbers.Integral) and d > 0 for d in shape):
        raise ValueError(f"{what}: shape must be (height, width, channels), got {shape!r}")
    alignment = _positive_int(what, "alignment", alignment)
    out = _ops.image_batch_align_op(images, shape=tuple(int(d) for d in shape),
                                    dtype=_image_dtype(what, dtype), alignment=alignment,
                                    name=name)
    out.graph.tensor_lists[out.id] = ("a tensor of data-dependent shape "
                                      "(flow.image.batch_align)")
    return out
