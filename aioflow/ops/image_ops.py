"""OneFlow's image preprocessing ops (``flow.image.*``): resizing to a fixed size or
keeping the aspect ratio, and ``crop_mirror_normalize``. Their inputs are batches of HWC
uint8 images, dense ``(B, H, W, C)`` or a tensor buffer ``(B,)`` of images of any size
(``flow.data.OFRecordImageDecoderRandomCrop``'s). As in OneFlow, the kernels run on the
host (the CPU and the strict backend); their dense results go to the job's device."""
from __future__ import annotations

import numpy as np

from .._core import dtypes
from ..kernels.image import resize as _resize
from .registry import register
from .tensor_buffer import _HOST_BACKENDS, _host, object_array

__all__ = ["image_resize_to_fixed_op", "image_resize_keep_aspect_ratio_op",
           "crop_mirror_normalize_op"]


def image_list(ctx, value, what: str) -> list:
    """The batch's images, each an (H, W, C) uint8 array."""
    host = _host(ctx, value)
    images = list(host) if host.dtype != object else list(host.reshape(-1))
    for i, image in enumerate(images):
        if not isinstance(image, np.ndarray) or image.ndim != 3 or image.dtype != np.uint8:
            raise TypeError(f"{what}: image {i} of the batch is not an (H, W, C) uint8 "
                            f"array, got {getattr(image, 'dtype', type(image).__name__)} "
                            f"{getattr(image, 'shape', '')}")
    return images


def check_images(what: str, blob) -> None:
    """A tensor buffer ``(B,)`` or a dense uint8 ``(B, H, W, C)`` Blob; else TypeError."""
    if blob.dtype == dtypes.tensor_buffer and blob.ndim == 1:
        return
    if blob.dtype == dtypes.uint8 and blob.ndim == 4:
        return
    raise TypeError(f"{what}: image must be a tensor buffer of shape (batch,) or a uint8 "
                    f"Blob (batch, H, W, C), got {blob.dtype.name} {blob.shape}")


# -- resize ------------------------------------------------------------------------------
def _infer_fixed(images, *, width, height, channels, dtype):
    return [((images.shape[0], height, width, channels), dtype),
            ((images.shape[0], 2), dtypes.float32)]


@register("image_resize_to_fixed", infer=_infer_fixed, differentiable=False,
          backends=_HOST_BACKENDS, host_values=True)
def image_resize_to_fixed_op(ctx, images, *, width, height, channels, dtype):
    what = "flow.image.Resize"
    batch = image_list(ctx, images, what)
    out = np.empty((len(batch), height, width, channels), dtypes.as_numpy(dtype))
    scale = np.empty((len(batch), 2), np.float32)
    for i, image in enumerate(batch):
        if image.shape[2] != channels:
            raise ValueError(f"{what}: image {i} has {image.shape[2]} channels, channels is "
                             f"{channels}")
        out[i] = _resize(image, width, height)
        scale[i] = (width / image.shape[1], height / image.shape[0])
    return ctx.xp.asarray(out), ctx.xp.asarray(scale)


def _infer_keep(images, *, target_size, min_size, max_size, resize_longer):
    batch = (images.shape[0],)
    return [(batch, dtypes.tensor_buffer), (batch + (2,), dtypes.int32),
            (batch + (2,), dtypes.float32)]


def keep_aspect_ratio_size(h, w, target_size, min_size, max_size, resize_longer):
    """OneFlow's rule: the shorter (or longer) side to ``target_size``, the longer side
    capped at ``max_size`` (the shorter raised to ``min_size``); (new_h, new_w)."""
    short, long_ = min(h, w), max(h, w)
    if resize_longer:
        target_long = target_size
        if min_size > 0 and short * target_size / long_ < min_size:
            target_long = round(min_size * long_ / short)
        ratio = target_long / long_
    else:
        target_short = target_size
        if max_size > 0 and long_ * target_size / short > max_size:
            target_short = round(max_size * short / long_)
        ratio = target_short / short
    return max(1, round(h * ratio)), max(1, round(w * ratio))


@register("image_resize_keep_aspect_ratio", infer=_infer_keep, differentiable=False,
          backends=_HOST_BACKENDS, host_values=True)
def image_resize_keep_aspect_ratio_op(ctx, images, *, target_size, min_size, max_size,
                                      resize_longer):
    batch = image_list(ctx, images, "flow.image.Resize")
    resized, sizes, scales = [], np.empty((len(batch), 2), np.int32), \
        np.empty((len(batch), 2), np.float32)
    for i, image in enumerate(batch):
        h, w = image.shape[:2]
        nh, nw = keep_aspect_ratio_size(h, w, target_size, min_size, max_size, resize_longer)
        resized.append(_resize(image, nw, nh))
        sizes[i] = (nw, nh)
        scales[i] = (nw / w, nh / h)
    return object_array(resized), ctx.xp.asarray(sizes), ctx.xp.asarray(scales)


# -- crop, mirror, normalize -------------------------------------------------------------
def _infer_cmn(images, *mirror, crop_h, crop_w, crop_pos_y, crop_pos_x, mean, std,
               channels, channels_first, dtype):
    if images.dtype == dtypes.uint8:
        crop_h, crop_w = crop_h or images.shape[1], crop_w or images.shape[2]
    elif not (crop_h and crop_w):
        raise ValueError("flow.image.CropMirrorNormalize: crop_h and crop_w are required "
                         "for a tensor buffer of images (their sizes vary)")
    shape = ((images.shape[0], channels, crop_h, crop_w) if channels_first
             else (images.shape[0], crop_h, crop_w, channels))
    return [(shape, dtype)]


@register("crop_mirror_normalize", infer=_infer_cmn, differentiable=False,
          backends=_HOST_BACKENDS, host_values=True)
def crop_mirror_normalize_op(ctx, images, *mirror, crop_h, crop_w, crop_pos_y, crop_pos_x,
                             mean, std, channels, channels_first, dtype):
    """OneFlow's kernel: the window at ``(H - crop_h) * crop_pos_y`` (truncated), the same
    along W, flipped left-right where ``mirror`` is non-zero, then ``(x - mean) / std`` per
    channel."""
    what = "flow.image.CropMirrorNormalize"
    batch = image_list(ctx, images, what)
    flips = (np.zeros(len(batch), np.int8) if not mirror
             else _host(ctx, mirror[0]).reshape(-1))
    if len(flips) != len(batch):
        raise ValueError(f"{what}: mirror_blob holds {len(flips)} values for a batch of "
                         f"{len(batch)}")
    outs = []
    for i, image in enumerate(batch):
        h, w, c = image.shape
        if c != channels:
            raise ValueError(f"{what}: image {i} has {c} channels, the color space "
                             f"{channels}")
        oh, ow = crop_h or h, crop_w or w
        if oh > h or ow > w:
            raise ValueError(f"{what}: image {i} is {h}x{w}, smaller than the crop "
                             f"{oh}x{ow}")
        if len(mean) not in (1, c) or len(std) not in (1, c):
            raise ValueError(f"{what}: mean and std must hold 1 or {c} values, got "
                             f"{len(mean)} and {len(std)}")
        y0, x0 = int((h - oh) * crop_pos_y), int((w - ow) * crop_pos_x)
        window = image[y0:y0 + oh, x0:x0 + ow].astype(np.float32)
        if flips[i]:
            window = window[:, ::-1]
        window = (window - np.float32(mean)) * (np.float32(1.0) / np.float32(std))
        outs.append(window.transpose(2, 0, 1) if channels_first else window)
    out = np.stack(outs).astype(dtypes.as_numpy(dtype))
    return ctx.xp.asarray(out)
