"""OneFlow's older data API: ``flow.data.decode_ofrecord`` with ``BlobConf`` and its codecs
and preprocessors, and ``flow.data.decode_random``.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> folder = "legacy_example"        # a new folder in the current directory
>>> _ = flow.data.ofrecord.write_ofrecord(folder, [{"v": np.arange(4, dtype=np.int64)}] * 2)
>>> @flow.global_function(type="predict")
... def legacy_job() -> tp.Numpy:
...     (v,) = flow.data.decode_ofrecord(folder, [flow.data.BlobConf(
...         "v", shape=(2, 2), dtype=flow.float, codec=flow.data.RawCodec())], batch_size=2)
...     return v
>>> import warnings
>>> with warnings.catch_warnings():   # decode_ofrecord warns: deprecated, as in OneFlow
...     warnings.simplefilter("ignore", DeprecationWarning)
...     legacy_job()[1]
array([[0., 1.],
       [2., 3.]], dtype=float32)
"""
from __future__ import annotations

import warnings

import numpy as np

from .._core import dtypes
from .. import initializers as _initializers
from .._core import seeds
from .._core.callsite import user_stacklevel
from .._core.deprecation import mark_deprecated
from ..ir import current_graph
from . import ofrecord_decode as decode
from .job_feeds import FeedSource
from .ofrecord_reader import OFRecordBatch, ofrecord_reader

__all__ = ["ImagePreprocessor", "ImageResizePreprocessor", "ImageCodec", "RawCodec",
           "BytesListCodec", "NormByChannelPreprocessor", "BlobConf", "decode_ofrecord",
           "decode_random"]


class ImagePreprocessor:
    """An image step of ``ImageCodec``: "bgr2rgb" (channels in RGB order instead of BGR) or
    "mirror" (each image flipped left-right with probability 1/2)."""

    def __init__(self, preprocessor: str):
        if not isinstance(preprocessor, str) or preprocessor.lower() not in ("bgr2rgb",
                                                                             "mirror"):
            raise ValueError(f'ImagePreprocessor: preprocessor must be "bgr2rgb" or "mirror", '
                             f"got {preprocessor!r}")
        self.preprocessor = preprocessor

    def is_rgb(self) -> bool:
        return self.preprocessor.lower() == "bgr2rgb"

    def is_mirror(self) -> bool:
        return self.preprocessor.lower() == "mirror"


class ImageResizePreprocessor:
    """An image step of ``ImageCodec``: resize (bilinear) to ``width`` x ``height``."""

    def __init__(self, width: int, height: int):
        for arg, value in (("width", width), ("height", height)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ImageResizePreprocessor: {arg} must be a positive int, "
                                 f"got {value!r}")
        self.width, self.height = width, height


class ImageCodec:
    """Decode the feature as an encoded image, then apply ``image_preprocessors``."""

    def __init__(self, image_preprocessors=None):
        self.image_preprocessors = (list(image_preprocessors)
                                    if isinstance(image_preprocessors, (list, tuple)) else [])

    def color_space(self) -> str:
        rgb = any(isinstance(p, ImagePreprocessor) and p.is_rgb()
                  for p in self.image_preprocessors)
        return "RGB" if rgb else "BGR"

    def do_mirror(self) -> bool:
        return any(isinstance(p, ImagePreprocessor) and p.is_mirror()
                   for p in self.image_preprocessors)

    def do_resize(self):
        for p in self.image_preprocessors:
            if isinstance(p, ImageResizePreprocessor):
                return True, p.width, p.height
        return False, -1, -1


class RawCodec:
    """Decode the feature's numbers (see ``OFRecordRawDecoder``)."""

    def __init__(self, auto_zero_padding: bool = False):
        self.auto_zero_padding = auto_zero_padding


class BytesListCodec:
    """Decode the feature's single bytes value into the blob's shape as raw numbers (one per
    byte, zeros after)."""


class NormByChannelPreprocessor:
    """``(x - mean_values[c]) / std_values[c]`` per channel; ``data_format``
    "channels_last" keeps images ``(H, W, C)``, "channels_first" makes them ``(C, H, W)``."""

    def __init__(self, mean_values, std_values=(1.0, 1.0, 1.0),
                 data_format: str = "channels_last"):
        if not isinstance(mean_values, (list, tuple)) or not isinstance(std_values,
                                                                        (list, tuple)):
            raise TypeError("NormByChannelPreprocessor: mean_values and std_values must be "
                            "lists or tuples")
        if data_format not in ("channels_last", "channels_first"):
            raise ValueError('NormByChannelPreprocessor: data_format must be "channels_last" '
                             f'or "channels_first", got {data_format!r}')
        self.mean_values, self.std_values = mean_values, std_values
        self.data_format = data_format

    def output_layout(self) -> str:
        return "NHWC" if self.data_format == "channels_last" else "NCHW"

    def apply(self, images: np.ndarray) -> np.ndarray:
        """``images`` (N, H, W, C) normalized, in the output layout, as float32."""
        mean = np.asarray(self.mean_values, np.float32)
        std = np.asarray(self.std_values, np.float32)
        out = (images.astype(np.float32) - mean) / std
        return out.transpose(0, 3, 1, 2) if self.data_format == "channels_first" else out


class BlobConf:
    """One blob of ``decode_ofrecord``: feature ``name`` decoded by ``codec`` to ``shape``
    (per record) and ``dtype``, then ``preprocessors`` (``NormByChannelPreprocessor``)."""

    def __init__(self, name: str, shape, dtype, codec, preprocessors=None):
        if not isinstance(name, str) or not isinstance(shape, (list, tuple)):
            raise TypeError(f"BlobConf: name must be a str and shape a list or tuple, got "
                            f"{name!r} and {shape!r}")
        if not isinstance(codec, (ImageCodec, RawCodec, BytesListCodec)):
            raise TypeError(f"BlobConf: codec must be an ImageCodec, a RawCodec or a "
                            f"BytesListCodec, got {codec!r}")
        self.name, self.shape = name, tuple(int(d) for d in shape)
        self.dtype = dtypes.convert(dtype)
        self.codec = codec
        self.preprocessors = list(preprocessors) if isinstance(preprocessors,
                                                               (list, tuple)) else []

    def decode_blob(self, input_blob: OFRecordBatch, batch_size: int):
        """The blob of this conf, decoded from ``input_blob``'s records each step."""
        what = f"flow.data.decode_ofrecord blob {self.name!r}"
        shape, dtype = self.shape, self.dtype.numpy
        if isinstance(self.codec, ImageCodec):
            rng = np.random.default_rng(input_blob.stream.seed)

            def run(records):
                return _cast(self._images(records, rng, what), shape, dtype, what)
        else:
            padding = isinstance(self.codec, BytesListCodec) or self.codec.auto_zero_padding

            def run(records):
                raw = decode.raw(records, self.name, shape, dtype, padding, what)
                for p in self.preprocessors:
                    raw = p.apply(raw[..., None] if raw.ndim == 1 else raw)
                return _cast(raw, shape, dtype, what)
        return input_blob.source.add_field(run, (batch_size,) + shape, self.dtype, self.name)

    def _images(self, records, rng, what) -> np.ndarray:
        codec = self.codec
        resize, width, height = codec.do_resize()
        if not resize:   # to the blob's own height and width
            channels_first = any(getattr(p, "data_format", "") == "channels_first"
                                 for p in self.preprocessors)
            height, width = self.shape[1:3] if channels_first else self.shape[:2]
        pictures = []
        for record in records:
            data = decode.one_bytes(decode.feature_of(record, self.name, what), self.name, what)
            pixels = decode.resize(decode.decode_image(data, codec.color_space(), self.name,
                                                       what), width, height)
            if codec.do_mirror() and rng.random() < 0.5:
                pixels = pixels[:, ::-1]
            pictures.append(pixels)
        images = np.stack(pictures)
        for p in self.preprocessors:
            images = p.apply(images)
        return images


def _cast(values: np.ndarray, shape: tuple, dtype: np.dtype, what: str) -> np.ndarray:
    if values.shape[1:] != shape:
        raise decode.DecodeError(f"{what}: decodes to {values.shape[1:]} per record, the "
                                 f"BlobConf says {shape}")
    return np.ascontiguousarray(values.astype(dtype, copy=False))


@mark_deprecated
def decode_ofrecord(ofrecord_dir: str, blobs, batch_size: int = 1, data_part_num: int = 1,
                    part_name_prefix: str = "part-", part_name_suffix_length: int = -1,
                    shuffle: bool = False, buffer_size: int = 1024, name: str | None = None):
    """Deprecated in OneFlow: a reader (``shuffle``: random shuffle with a buffer of
    ``buffer_size``) and one decoded blob per ``BlobConf`` of ``blobs``, as a tuple."""
    warnings.warn("flow.data.decode_ofrecord is deprecated: use flow.data.ofrecord_reader "
                  "and its decoders", DeprecationWarning, stacklevel=user_stacklevel())
    records = ofrecord_reader(ofrecord_dir, batch_size, data_part_num, part_name_prefix,
                              part_name_suffix_length, random_shuffle=shuffle,
                              shuffle_buffer_size=buffer_size, name=name)
    return tuple(conf.decode_blob(records, batch_size) for conf in blobs)


def decode_random(shape, dtype, batch_size: int = 1, initializer=None, tick=None,
                  name: str | None = None):
    """A blob ``(batch_size, *shape)`` of ``dtype`` drawn anew at every step from
    ``initializer`` (default ``flow.random_uniform_initializer()``: uniform in [0, 1)),
    prepared ahead on a loader thread; seeded by ``flow.random.seed`` when it was called.
    ``tick`` ordered OneFlow's op after another: accepted, no effect (steps run in order)."""
    graph = current_graph()
    what = "flow.data.decode_random"
    if not isinstance(shape, (list, tuple)):
        raise TypeError(f"{what}: shape must be a list or tuple, got {shape!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"{what}: batch_size must be a positive int, got {batch_size!r}")
    initializer = initializer or _initializers.random_uniform_initializer()
    if not isinstance(initializer, _initializers.Initializer):
        raise TypeError(f"{what}: initializer must be a flow initializer, got {initializer!r}")
    full_shape = (batch_size,) + tuple(int(d) for d in shape)
    dtype = dtypes.convert(dtype)
    seed = seeds.loader_seed()

    def batches():
        rng = np.random.default_rng(seed)
        while True:
            yield initializer(full_shape, dtype.numpy, rng)

    source = FeedSource(graph, batches, what)
    return source.add_field(lambda values: values, full_shape, dtype, name or "DecodeRandom")
