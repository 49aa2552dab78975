"""Image kernels on host pixels, shared by the image ops and the data readers.

OneFlow's image kernels are OpenCV calls (``user/image/image_util.cpp``, the resize, decode
and polygon kernels): ``cv::resize``, ``cv::imdecode``, ``cv::fillPoly``. Where OpenCV's
Python package (``cv2``) is installed these kernels call the same functions, so their
results are OneFlow's to the bit. Without it they run their numpy ports of OpenCV's
formulas (the same sampling positions and weights; bilinear uint8 results may differ from
OpenCV's fixed-point arithmetic by 1) and decode with Pillow.
"""
from __future__ import annotations

import io

import numpy as np

__all__ = ["INTERPOLATIONS", "interpolation_for", "resize", "decode", "polygons_to_mask",
           "random_crop_window", "crop_range", "decode_random_crop_resize"]

# OneFlow's interpolation_type values (CheckInterpolationValid) and their OpenCV flags.
INTERPOLATIONS = ("auto", "bilinear", "nearest_neighbor", "nn", "bicubic", "area")
_CV_FLAGS = {"bilinear": 1, "nearest_neighbor": 0, "nn": 0, "bicubic": 2, "area": 3}


def _cv2():
    """OpenCV's module, or None where it is not installed (an optional dependency)."""
    try:
        import cv2
    except ImportError:
        return None
    return cv2


def interpolation_for(kind: str, src_w: int, src_h: int, dst_w: int, dst_h: int) -> str:
    """OneFlow's ``GetCvInterpolationFlag``: "auto" is bilinear when the image grows (or
    keeps its area) and area averaging when it shrinks; "nn" is "nearest_neighbor"."""
    if kind == "auto":
        return "bilinear" if dst_w * dst_h >= src_w * src_h else "area"
    if kind == "nn":
        return "nearest_neighbor"
    if kind not in INTERPOLATIONS:
        raise ValueError(f"interpolation_type must be one of {INTERPOLATIONS}, got {kind!r}")
    return kind


def resize(pixels: np.ndarray, width: int, height: int,
           interpolation: str = "bilinear") -> np.ndarray:
    """``pixels`` (H, W, C), uint8 or float32, resized to (height, width, C) as
    ``cv2.resize(pixels, (width, height), interpolation=...)`` does; ``interpolation`` one
    of :data:`INTERPOLATIONS` ("auto" picks as OneFlow does)."""
    src_h, src_w = pixels.shape[:2]
    kind = interpolation_for(interpolation, src_w, src_h, width, height)
    if (src_h, src_w) == (height, width):
        return pixels.copy()
    cv2 = _cv2()
    if cv2 is not None and pixels.dtype in (np.uint8, np.float32):
        out = cv2.resize(np.ascontiguousarray(pixels), (width, height),
                         interpolation=_CV_FLAGS[kind])
        return out.reshape(height, width, pixels.shape[2])
    fy, fx = src_h / height, src_w / width
    if kind in ("area", "bilinear") and fy.is_integer() and fx.is_integer() and \
            (kind == "area" or fx == fy == 2):
        # OpenCV's resizeAreaFast (which a bilinear halving also takes): block means,
        # uint8 ones rounded half up as its vector code does
        fy, fx = int(fy), int(fx)
        blocks = pixels.reshape(height, fy, width, fx, -1)
        if pixels.dtype == np.uint8:
            total = blocks.sum(axis=(1, 3), dtype=np.int64)
            return ((total + fy * fx // 2) // (fy * fx)).astype(np.uint8)
        return blocks.astype(np.float32).mean(axis=(1, 3)).astype(pixels.dtype)
    rows = _taps(src_h, height, kind)
    cols = _taps(src_w, width, kind)
    work = pixels.astype(np.float32)
    work = np.einsum("dk,dkwc->dwc", rows[1], work[rows[0]])
    work = np.einsum("dk,hdkc->hdc", cols[1], work[:, cols[0]])
    if pixels.dtype == np.uint8:
        return np.clip(np.rint(work), 0, 255).astype(np.uint8)
    return work.astype(pixels.dtype)


def _taps(src: int, dst: int, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """For each output index along one axis, the source indices (dst, K) and weights
    (dst, K) OpenCV's ``resize`` combines (``resizeGeneric``'s and ``resizeArea``'s
    coefficient tables), borders replicated."""
    scale = 1.0 / (dst / src)          # OpenCV: scale_x = 1. / inv_scale_x
    d = np.arange(dst, dtype=np.float64)
    if kind == "nearest_neighbor":
        index = np.minimum(np.floor(d * scale).astype(np.int64), src - 1)
        return index[:, None], np.ones((dst, 1), np.float32)
    if kind == "area" and scale >= 1:
        return _area_taps(src, dst, scale)
    if kind == "area":                  # growing: OpenCV's linear weights of area mode
        start = np.floor(d * scale)
        frac = ((d + 1) - (start + 1) * (dst / src)).astype(np.float32)
        frac = np.where(frac <= 0, 0.0, frac - np.floor(frac)).astype(np.float32)
    else:
        pos = ((d + 0.5) * scale - 0.5).astype(np.float32)
        start = np.floor(pos)
        frac = (pos - start).astype(np.float32)
    start = start.astype(np.int64)
    if kind == "bicubic":
        a = np.float32(-0.75)           # OpenCV's interpolateCubic, in float32
        x = frac
        w0 = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a
        w1 = ((a + 2) * x - (a + 3)) * x * x + 1
        w2 = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1
        weights = np.stack([w0, w1, w2, 1 - w0 - w1 - w2], axis=1).astype(np.float32)
        index = start[:, None] + np.arange(-1, 3)
        return np.clip(index, 0, src - 1), weights
    low = start < 0                      # OpenCV: fx = 0 at both borders
    high = start >= src - 1
    frac = np.where(low | high, np.float32(0), frac)
    start = np.where(low, 0, np.where(high, src - 1, start))
    index = np.clip(np.stack([start, start + 1], axis=1), 0, src - 1)
    weights = np.stack([1 - frac, frac], axis=1).astype(np.float32)
    return index, weights


def _area_taps(src: int, dst: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """OpenCV's ``computeResizeAreaTab``: each output pixel averages the source cells its
    footprint ``[d * scale, (d + 1) * scale)`` covers, partial cells by their share."""
    taps = []
    for d in range(dst):
        fs1 = d * scale
        fs2 = fs1 + scale
        cell = min(scale, src - fs1)
        s1 = int(np.ceil(fs1))
        s2 = min(int(np.floor(fs2)), src - 1)
        s1 = min(s1, s2)
        row = []
        if s1 - fs1 > 1e-3:
            row.append((s1 - 1, (s1 - fs1) / cell))
        row += [(s, 1.0 / cell) for s in range(s1, s2)]
        if fs2 - s2 > 1e-3:
            row.append((s2, min(min(fs2 - s2, 1.0), cell) / cell))
        taps.append(row)
    width = max(len(row) for row in taps)
    index = np.zeros((dst, width), np.int64)
    weights = np.zeros((dst, width), np.float32)
    for d, row in enumerate(taps):
        for k, (s, w) in enumerate(row):
            index[d, k], weights[d, k] = s, w
    return index, weights


def decode(data: bytes, color_space: str = "BGR") -> np.ndarray:
    """One encoded image (JPEG, PNG, ...) as uint8 ``(H, W, C)``: C=3 in ``color_space``
    order ("BGR", OpenCV's, or "RGB"), or C=1 for "GRAY". ValueError where it does not
    decode."""
    cv2 = _cv2()
    if cv2 is not None:
        flag = (cv2.IMREAD_GRAYSCALE if color_space == "GRAY" else cv2.IMREAD_COLOR)
        pixels = cv2.imdecode(np.frombuffer(data, np.uint8), flag | cv2.IMREAD_ANYDEPTH)
        if pixels is None:
            raise ValueError("not an image OpenCV can decode")
        if color_space == "GRAY":
            return pixels.reshape(pixels.shape[:2] + (1,))
        return pixels[:, :, ::-1].copy() if color_space == "RGB" else pixels
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError:
        raise ImportError("decoding images needs OpenCV (opencv-python-headless) or Pillow; "
                          "pip install pillow") from None
    try:
        with Image.open(io.BytesIO(data)) as image:
            pixels = np.asarray(image.convert("L" if color_space == "GRAY" else "RGB"))
    except (UnidentifiedImageError, OSError) as err:
        raise ValueError(f"not an image Pillow can decode ({err})") from None
    if color_space == "GRAY":
        return pixels[:, :, None]
    return pixels[:, :, ::-1].copy() if color_space == "BGR" else pixels


def polygons_to_mask(polygons: list, width: int, height: int) -> np.ndarray:
    """An int8 ``(height, width)`` mask, 1 inside the polygons (each an (n, 2) int array of
    pixel coordinates) as ``cv2.fillPoly(mask, polygons, 1, cv2.LINE_8)`` fills it: the
    even-odd rule over all of them, their outlines included."""
    mask = np.zeros((height, width), np.int8)
    cv2 = _cv2()
    if cv2 is not None:
        cv2.fillPoly(mask, [np.asarray(p, np.int32).reshape(-1, 2) for p in polygons], 1,
                     lineType=cv2.LINE_8)
        return mask
    inside = np.zeros((height, width), bool)
    ys, xs = np.mgrid[0:height, 0:width]
    for poly in polygons:
        pts = np.asarray(poly, np.float64).reshape(-1, 2)
        crossing = np.zeros((height, width), bool)
        for (x0, y0), (x1, y1) in zip(pts, np.roll(pts, -1, axis=0)):
            if y0 == y1:
                continue
            spans = (ys >= min(y0, y1)) & (ys < max(y0, y1))
            x_at = x0 + (ys - y0) * (x1 - x0) / (y1 - y0)
            crossing ^= spans & (xs < x_at)
        inside ^= crossing
        for (x0, y0), (x1, y1) in zip(pts, np.roll(pts, -1, axis=0)):   # the outline
            steps = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
            t = np.linspace(0.0, 1.0, steps + 1)
            px = np.clip(np.rint(x0 + t * (x1 - x0)).astype(int), 0, width - 1)
            py = np.clip(np.rint(y0 + t * (y1 - y0)).astype(int), 0, height - 1)
            on = ((x0 + t * (x1 - x0) >= 0) & (x0 + t * (x1 - x0) < width)
                  & (y0 + t * (y1 - y0) >= 0) & (y0 + t * (y1 - y0) < height))
            inside[py[on], px[on]] = True
    mask[inside] = 1
    return mask


# -- random crops (OFRecordImageDecoderRandomCrop, ImageDecoderRandomCropResize,
#    flow.image.random_crop) ----------------------------------------------------------------

def random_crop_window(shape, area, ratio, num_attempts, rng):
    """OneFlow's ``RandomCropGenerator::GenerateCropWindow``: ((y, x), (h, w))."""
    H, W = shape  # noqa: N806 - OneFlow's names
    min_ratio, max_ratio = ratio
    min_area = W * H * area[0]
    max_w = max(1, int(H * max_ratio))
    max_h = max(1, int(W / min_ratio))
    if H * max_w < min_area:
        h, w = H, max_w
    elif W * max_h < min_area:
        h, w = max_h, W
    else:
        for _ in range(num_attempts):
            target = rng.uniform(*area) * H * W
            r = float(np.exp(rng.uniform(np.log(min_ratio), np.log(max_ratio))))
            w = max(1, int(round(np.sqrt(target * r))))
            h = max(1, int(round(np.sqrt(target / r))))
            if w <= W and h <= H and min_ratio <= w / h <= max_ratio:
                break
        else:
            whole = W / H
            h, w = ((H, max_w) if whole > max_ratio else (max_h, W) if whole < min_ratio
                    else (H, W))
            scale = min(1.0, area[1] * W * H / (h * w))
            h, w = max(1, int(h * np.sqrt(scale))), max(1, int(w * np.sqrt(scale)))
    h, w = min(h, H), min(w, W)
    return (int(rng.integers(0, H - h + 1)), int(rng.integers(0, W - w + 1))), (h, w)


def decode_random_crop_resize(data: bytes, width: int, height: int, area, ratio,
                              num_attempts: int, rng) -> np.ndarray:
    """OneFlow's ``ImageDecoderRandomCropResize`` kernel on one encoded image: uint8
    ``(height, width, 3)`` in RGB order, the window :func:`random_crop_window` draws from
    ``rng`` resized to ``width`` x ``height``, bilinear. RGB: the CPU kernel decodes with
    ``cv::imdecode`` (BGR) and converts ``COLOR_BGR2RGB``, the GPU one asks nvJPEG for
    ``NVJPEG_OUTPUT_RGBI``; the resize is ``cv::resize(..., INTER_LINEAR)`` (nppiResize
    linear on the GPU), never the "auto" area averaging of ``flow.image.Resize``.
    ValueError where the bytes do not decode to an 8-bit image."""
    image = decode(data, "RGB")
    if image.dtype != np.uint8:
        # OpenCV's IMREAD_ANYDEPTH keeps a 16-bit PNG's depth; OneFlow's IMREAD_COLOR
        # would have scaled it to 8 bits: refuse rather than wrap around silently.
        raise ValueError(f"decodes to {image.dtype} pixels, an 8-bit image is needed")
    (y, x), (h, w) = random_crop_window(image.shape[:2], area, ratio, num_attempts, rng)
    return resize(image[y:y + h, x:x + w], width, height, "bilinear")


def crop_range(what: str, arg: str, value, upper=None) -> tuple:
    """A random crop's (low, high) ``random_area`` or ``random_aspect_ratio``, checked."""
    try:
        low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: {arg} must be a (low, high) pair of numbers, got "
                         f"{value!r}") from None
    if not 0 < low <= high or (upper is not None and high > upper):
        raise ValueError(f"{what}: {arg} must satisfy 0 < low <= high"
                         f"{f' <= {upper}' if upper is not None else ''}, got {value!r}")
    return low, high
