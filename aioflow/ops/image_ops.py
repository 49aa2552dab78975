"""OneFlow's image and object-detection preprocessing ops (``flow.image.*``,
``flow.detection.*``): resizing to a fixed size or keeping the aspect ratio, decoding,
flipping, normalizing, aligning a batch, ``crop_mirror_normalize``, and the box and
polygon transforms of detection pipelines. Their image inputs are batches of HWC images,
uint8 or float32: a tensor buffer ``(B,)`` of images of any size (a reader's, or
``flow.tensor_list_to_tensor_buffer``'s) or, for resizing and ``crop_mirror_normalize``,
a dense uint8 ``(B, H, W, C)``. As in OneFlow, the kernels run on the host (the CPU and
the strict backend; ``kernels/image.py``: OpenCV's functions, as OneFlow's kernels call
them); their dense results go to the job's device."""
from __future__ import annotations

import numpy as np

from .._core import dtypes
from ..kernels import image as _image
from .registry import register
from .tensor_buffer import _HOST_BACKENDS, _host, object_array

__all__ = ["image_resize_to_fixed_op", "image_resize_keep_aspect_ratio_op",
           "crop_mirror_normalize_op", "image_decode_op", "image_flip_op", "image_random_crop_op",
           "image_normalize_op", "image_batch_align_op", "object_bbox_flip_op",
           "object_bbox_scale_op", "object_segmentation_polygon_flip_op",
           "object_segmentation_polygon_scale_op", "object_segmentation_polygon_to_mask_op"]

_IMAGE_DTYPES = (np.uint8, np.float32)


def image_list(ctx, value, what: str, dtypes_=(np.uint8,)) -> list:
    """The batch's images, each an (H, W, C) array of one of ``dtypes_``."""
    host = _host(ctx, value)
    images = list(host) if host.dtype != object else list(host.reshape(-1))
    for i, image in enumerate(images):
        if not isinstance(image, np.ndarray) or image.ndim != 3 or image.dtype not in dtypes_:
            kinds = " or ".join(np.dtype(d).name for d in dtypes_)
            raise TypeError(f"{what}: image {i} of the batch is not an (H, W, C) {kinds} "
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


def _buffer_of(what, arg, items: list, check) -> list:
    for i, item in enumerate(items):
        if not isinstance(item, np.ndarray) or not check(item):
            raise ValueError(f"{what}: element {i} of {arg} is "
                             f"{getattr(item, 'dtype', type(item).__name__)} "
                             f"{getattr(item, 'shape', '')}, not what it must hold")
    return items


def _per_image(ctx, value, batch: int, what: str, arg: str, dtype) -> np.ndarray:
    """A dense per-image input (``(B, 2)`` sizes or scales, ``(B,)`` flip codes)."""
    host = np.asarray(_host(ctx, value))
    if host.shape[0] != batch:
        raise ValueError(f"{what}: {arg} holds {host.shape[0]} rows for a batch of {batch}")
    return host.astype(dtype)


def _converted(pixels: np.ndarray, dtype) -> np.ndarray:
    """OpenCV's ``convertTo``: rounding half to even and saturating to uint8."""
    want = dtypes.as_numpy(dtype)
    if pixels.dtype == want:
        return pixels
    if want == np.uint8:
        return np.clip(np.rint(pixels), 0, 255).astype(np.uint8)
    return pixels.astype(want)


# -- resize ------------------------------------------------------------------------------
def _infer_fixed(images, *, width, height, channels, dtype, interpolation="bilinear"):
    return [((images.shape[0], height, width, channels), dtype),
            ((images.shape[0], 2), dtypes.float32)]


@register("image_resize_to_fixed", infer=_infer_fixed, differentiable=False,
          backends=_HOST_BACKENDS, host_values=True)
def image_resize_to_fixed_op(ctx, images, *, width, height, channels, dtype,
                             interpolation="bilinear"):
    """OneFlow's kernel: each image resized in its own dtype, then converted to ``dtype``;
    ``scale`` (w, h) = (width / w, height / h) in float32."""
    what = "flow.image.Resize"
    batch = image_list(ctx, images, what, _IMAGE_DTYPES)
    out = np.empty((len(batch), height, width, channels), dtypes.as_numpy(dtype))
    scale = np.empty((len(batch), 2), np.float32)
    for i, image in enumerate(batch):
        if image.shape[2] != channels:
            raise ValueError(f"{what}: image {i} has {image.shape[2]} channels, channels is "
                             f"{channels}")
        out[i] = _converted(_image.resize(image, width, height, interpolation), dtype)
        scale[i] = (np.float32(width) / np.float32(image.shape[1]),
                    np.float32(height) / np.float32(image.shape[0]))
    return ctx.xp.asarray(out), ctx.xp.asarray(scale)


def _infer_keep(images, *, target_size, min_size, max_size, resize_longer,
                interpolation="bilinear"):
    batch = (images.shape[0],)
    return [(batch, dtypes.tensor_buffer), (batch + (2,), dtypes.int32),
            (batch + (2,), dtypes.float32)]


def keep_aspect_ratio_size(h, w, target_size, min_size, max_size, resize_longer):
    """OneFlow's ``GetTargetResizedSize4ImageBuffer``: the shorter (or longer) side to
    ``target_size``, the other by the aspect ratio (rounded half to even), the longer side
    capped at ``max_size`` (the shorter raised to ``min_size``); (new_h, new_w)."""
    aspect = min(h, w) / max(h, w)
    if resize_longer:
        res_max = float(target_size)
        res_min = round(res_max * aspect)
        if min_size > 0 and res_min < min_size:
            res_min = float(min_size)
            res_max = round(res_min / aspect)
    else:
        res_min = float(target_size)
        res_max = round(res_min / aspect)
        if max_size > 0 and res_max > max_size:
            res_max = float(max_size)
            res_min = round(res_max * aspect)
    if w < h:
        return int(res_max), int(res_min)
    return int(res_min), int(res_max)


@register("image_resize_keep_aspect_ratio", infer=_infer_keep, differentiable=False,
          backends=_HOST_BACKENDS, host_values=True)
def image_resize_keep_aspect_ratio_op(ctx, images, *, target_size, min_size, max_size,
                                      resize_longer, interpolation="bilinear"):
    batch = image_list(ctx, images, "flow.image.Resize", _IMAGE_DTYPES)
    resized, sizes, scales = [], np.empty((len(batch), 2), np.int32), \
        np.empty((len(batch), 2), np.float32)
    for i, image in enumerate(batch):
        h, w = image.shape[:2]
        nh, nw = keep_aspect_ratio_size(h, w, target_size, min_size, max_size, resize_longer)
        resized.append(_image.resize(image, nw, nh, interpolation))
        sizes[i] = (nw, nh)
        scales[i] = (np.float32(nw) / np.float32(w), np.float32(nh) / np.float32(h))
    return object_array(resized), ctx.xp.asarray(sizes), ctx.xp.asarray(scales)


# -- decode, flip, normalize, batch align ------------------------------------------------
def _same_buffer(images, *args, **attrs):
    return [(images.shape, dtypes.tensor_buffer)]


@register("image_decode", infer=_same_buffer, differentiable=False,
          backends=_HOST_BACKENDS, host_values=True)
def image_decode_op(ctx, encoded, *, color_space, dtype):
    """Each element's bytes (int8 or uint8) decoded to an (H, W, C) image of ``dtype``
    (uint8 or float32) in ``color_space`` (OneFlow's kernel: ``cv::imdecode``)."""
    what = "flow.image.decode"
    outs = []
    for i, item in enumerate(_host(ctx, encoded).reshape(-1)):
        if not isinstance(item, np.ndarray) or item.dtype not in (np.int8, np.uint8):
            raise TypeError(f"{what}: element {i} of the buffer is not int8 or uint8 bytes")
        try:
            pixels = _image.decode(np.ascontiguousarray(item).view(np.uint8).tobytes(),
                                   color_space)
        except ValueError as err:
            raise ValueError(f"{what}: element {i}: {err}") from None
        outs.append(_converted(pixels, dtype))
    return object_array(outs, _host(ctx, encoded).shape)


@register("image_flip", infer=_same_buffer, differentiable=False,
          backends=_HOST_BACKENDS, host_values=True)
def image_flip_op(ctx, images, *flip_code, code=0):
    """Each image flipped by its code (an int8 ``(B,)`` Blob, or ``code`` for all): bit
    0x01 left-right, bit 0x10 upside down (OneFlow's ``FlipCode``, ``cv::flip``)."""
    what = "flow.image.flip"
    batch = image_list(ctx, images, what, _IMAGE_DTYPES)
    codes = (_per_image(ctx, flip_code[0], len(batch), what, "flip_code", np.int64)
             if flip_code else np.full(len(batch), code))
    outs = []
    for image, c in zip(batch, codes.reshape(-1)):
        out = image[:, ::-1] if c & 0x01 else image
        out = out[::-1] if c & 0x10 else out
        outs.append(np.ascontiguousarray(out))
    return object_array(outs)


@register("image_random_crop", infer=_same_buffer, differentiable=False,
          backends=_HOST_BACKENDS, host_values=True)
def image_random_crop_op(ctx, images, *, num_attempts, seed, random_area,
                         random_aspect_ratio):
    """Each image cropped to a window drawn as OneFlow's ``RandomCropGenerator`` draws it
    (:func:`aioflow.kernels.image.random_crop_window`), from the step's generator for
    ``seed``: new windows every step, the same sequence for a given seed."""
    rng = ctx.rng_for(seed)
    outs = []
    for image in image_list(ctx, images, "flow.image.random_crop", _IMAGE_DTYPES):
        (y, x), (h, w) = _image.random_crop_window(image.shape[:2], random_area,
                                                   random_aspect_ratio, num_attempts, rng)
        outs.append(np.ascontiguousarray(image[y:y + h, x:x + w]))
    return object_array(outs)


@register("image_normalize", infer=_same_buffer, differentiable=False,
          backends=_HOST_BACKENDS, host_values=True)
def image_normalize_op(ctx, images, *, std, mean):
    """``(x - mean[c]) / std[c]`` per channel of each float image (OneFlow's kernel)."""
    what = "flow.image.normalize"
    batch = image_list(ctx, images, what, (np.float32,))
    outs = []
    for i, image in enumerate(batch):
        if image.shape[2] != len(std) or image.shape[2] != len(mean):
            raise ValueError(f"{what}: image {i} has {image.shape[2]} channels, std and mean "
                             f"hold {len(std)} and {len(mean)} values")
        outs.append((image - np.float32(mean)) / np.float32(std))
    return object_array(outs)


def _infer_align(images, *, shape, dtype, alignment):
    return [((images.shape[0],) + tuple(shape), dtype)]


@register("image_batch_align", infer=_infer_align, differentiable=False,
          backends=_HOST_BACKENDS, host_values=True)
def image_batch_align_op(ctx, images, *, shape, dtype, alignment):
    """A dense ``(B, H', W', C)`` batch: H' and W' the batch's largest height and width
    rounded up to ``alignment``, each image at the top left, zeros elsewhere (OneFlow's
    kernel; the static ``shape`` is only the maximum, the result has the actual one)."""
    what = "flow.image.batch_align"
    batch = image_list(ctx, images, what, _IMAGE_DTYPES)
    channels = shape[2]

    def up(n):
        return (n + alignment - 1) // alignment * alignment

    height = up(max(image.shape[0] for image in batch))
    width = up(max(image.shape[1] for image in batch))
    if height * width > shape[0] * shape[1]:
        raise ValueError(f"{what}: the aligned batch is {height}x{width}, more than the "
                         f"shape {tuple(shape)} given")
    out = np.zeros((len(batch), height, width, channels), dtypes.as_numpy(dtype))
    for i, image in enumerate(batch):
        if image.shape[2] != channels:
            raise ValueError(f"{what}: image {i} has {image.shape[2]} channels, shape has "
                             f"{channels}")
        out[i, :image.shape[0], :image.shape[1]] = image
    return ctx.xp.asarray(out)


# -- boxes and polygons ------------------------------------------------------------------
def _rows_of(ctx, value, what, arg, width):
    items = list(_host(ctx, value).reshape(-1))
    return _buffer_of(what, arg, items, lambda a: a.ndim == 2 and a.shape[1] == width
                      and a.dtype.kind == "f")


def _flipped(ctx, values, image_size, flip_code, code, what, arg, width, flip) -> np.ndarray:
    """Each image's rows (``(n, width)`` floats of ``values``) flipped by ``flip(out, rows,
    w, h, c)`` for its size (w, h) and code (``flip_code``'s, else ``code``)."""
    rows = _rows_of(ctx, values, what, arg, width)
    sizes = _per_image(ctx, image_size, len(rows), what, "image_size", np.int64)
    codes = (_per_image(ctx, flip_code[0], len(rows), what, "flip_code", np.int64).reshape(-1)
             if flip_code else np.full(len(rows), code))
    outs = []
    for r, (w, h), c in zip(rows, sizes, codes):
        out = r.copy()
        flip(out, r, r.dtype.type(w), r.dtype.type(h), c)   # in the rows' dtype, as OneFlow
        outs.append(out)
    return object_array(outs)


def _scaled(ctx, values, scale, what, arg, width) -> np.ndarray:
    """Each image's rows, x columns by ``scale[i, 0]`` and y columns by ``scale[i, 1]``."""
    rows = _rows_of(ctx, values, what, arg, width)
    factors = _per_image(ctx, scale, len(rows), what, "scale", np.float32)
    return object_array([r * np.tile(np.float32(f), width // 2).astype(r.dtype)
                         for r, f in zip(rows, factors)])


def _flip_boxes(out, b, w, h, c):
    one = b.dtype.type(1)
    if c & 0x01:
        out[:, 0], out[:, 2] = w - b[:, 2] - one, w - b[:, 0] - one
    if c & 0x10:
        out[:, 1], out[:, 3] = h - b[:, 3] - one, h - b[:, 1] - one


def _flip_points(out, p, w, h, c):
    if c & 0x01:
        out[:, 0] = w - p[:, 0]
    if c & 0x10:
        out[:, 1] = h - p[:, 1]


@register("object_bbox_flip", infer=_same_buffer, differentiable=False,
          backends=_HOST_BACKENDS, host_values=True)
def object_bbox_flip_op(ctx, bbox, image_size, *flip_code, code=0):
    """Each image's boxes ``(n, 4)`` (xmin, ymin, xmax, ymax): x -> width - 1 - x with
    xmin and xmax swapped for bit 0x01, the same along y for 0x10 (OneFlow's kernel)."""
    return _flipped(ctx, bbox, image_size, flip_code, code, "flow.detection.object_bbox_flip",
                    "bbox", 4, _flip_boxes)


@register("object_bbox_scale", infer=_same_buffer, differentiable=False,
          backends=_HOST_BACKENDS, host_values=True)
def object_bbox_scale_op(ctx, bbox, scale):
    """Each image's boxes, x by ``scale[i, 0]`` and y by ``scale[i, 1]``."""
    return _scaled(ctx, bbox, scale, "flow.detection.object_bbox_scale", "bbox", 4)


@register("object_segmentation_polygon_flip", infer=_same_buffer, differentiable=False,
          backends=_HOST_BACKENDS, host_values=True)
def object_segmentation_polygon_flip_op(ctx, poly, image_size, *flip_code, code=0):
    """Each image's polygon points ``(n, 2)``: x -> width - x for bit 0x01, y -> height -
    y for 0x10 (OneFlow's kernel: no -1 here, unlike the boxes)."""
    return _flipped(ctx, poly, image_size, flip_code, code,
                    "flow.detection.object_segmentation_polygon_flip", "poly", 2, _flip_points)


@register("object_segmentation_polygon_scale", infer=_same_buffer, differentiable=False,
          backends=_HOST_BACKENDS, host_values=True)
def object_segmentation_polygon_scale_op(ctx, poly, scale):
    """Each image's polygon points, x by ``scale[i, 0]`` and y by ``scale[i, 1]``."""
    return _scaled(ctx, poly, scale, "flow.detection.object_segmentation_polygon_scale",
                   "poly", 2)


@register("object_segmentation_polygon_to_mask", infer=_same_buffer, differentiable=False,
          backends=_HOST_BACKENDS, host_values=True)
def object_segmentation_polygon_to_mask_op(ctx, poly, poly_index, image_size):
    """Each image's int8 masks ``(objects, height, width)``: the points of ``poly`` with
    their ``poly_index`` rows (point, polygon, object) grouped into objects' polygons,
    rounded half to even and filled (OneFlow's ``PolygonsToMask``: ``cv::fillPoly``)."""
    what = "flow.detection.object_segmentation_polygon_to_mask"
    points = _rows_of(ctx, poly, what, "poly", 2)
    indices = list(_host(ctx, poly_index).reshape(-1))
    _buffer_of(what, "poly_index", indices,
               lambda a: a.ndim == 2 and a.shape[1] == 3 and a.dtype.kind in "iu")
    if len(indices) != len(points):
        raise ValueError(f"{what}: poly holds {len(points)} images, poly_index "
                         f"{len(indices)}")
    sizes = _per_image(ctx, image_size, len(points), what, "image_size", np.int64)
    outs = []
    for i, (p, index, (w, h)) in enumerate(zip(points, indices, sizes)):
        if len(p) != len(index):
            raise ValueError(f"{what}: image {i} has {len(p)} points and {len(index)} "
                             "poly_index rows")
        objects: list[list[list]] = []
        for (x, y), (k, j, s) in zip(np.rint(p).astype(np.int64), index):
            if s == len(objects):
                objects.append([])
            if s != len(objects) - 1 or j not in (len(objects[-1]), len(objects[-1]) - 1):
                raise ValueError(f"{what}: image {i}: poly_index rows must number objects, "
                                 "polygons and points in order from 0")
            if j == len(objects[-1]):
                objects[-1].append([])
            objects[-1][j].append((x, y))
        masks = [_image.polygons_to_mask(polys, int(w), int(h)) for polys in objects]
        outs.append(np.stack(masks) if masks else np.zeros((0, int(h), int(w)), np.int8))
    return object_array(outs)


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
