"""Datasets (MNIST with download + cache + checksum, bundled handwritten digits), the
prefetching ``Loader``, and OneFlow's OFRecord data sets read inside jobs
(``ofrecord_reader`` and its decoders; ``aioflow.data.ofrecord`` writes them), and COCO
detection data sets (``coco_reader``)."""

from . import ofrecord
from .coco_reader import coco_reader
from ._download import DatasetUnavailableError
from .digits import load_digits
from ..runtime.loader import Loader
from .mnist import load_mnist
from .ofrecord_legacy import (BlobConf, BytesListCodec, ImageCodec, ImagePreprocessor,
                              ImageResizePreprocessor, NormByChannelPreprocessor, RawCodec,
                              decode_ofrecord, decode_random)
from .ofrecord_reader import (ImageDecoderRandomCropResize, OFRecordBytesDecoder,
                              OFRecordImageDecoder, OFRecordImageDecoderRandomCrop,
                              OFRecordRawDecoder, image_decoder_random_crop_resize,
                              ofrecord_image_decoder_random_crop,
                              ofrecord_bytes_decoder, ofrecord_image_classification_reader,
                              ofrecord_image_decoder, ofrecord_loader, ofrecord_raw_decoder,
                              ofrecord_reader)
from . import onerec
from .onerec_reader import OneRecDecoder, onerec_decoder, onerec_reader

__all__ = [
    "BlobConf", "BytesListCodec", "DatasetUnavailableError", "ImageCodec",
    "ImageDecoderRandomCropResize", "image_decoder_random_crop_resize", "ImagePreprocessor", "ImageResizePreprocessor", "Loader", "NormByChannelPreprocessor",
    "OFRecordBytesDecoder", "OFRecordImageDecoder", "OFRecordImageDecoderRandomCrop",
    "OFRecordRawDecoder", "RawCodec", "ofrecord_image_decoder_random_crop",
    "coco_reader", "decode_ofrecord", "decode_random", "load_digits", "load_mnist", "ofrecord",
    "ofrecord_bytes_decoder", "ofrecord_image_classification_reader",
    "ofrecord_image_decoder", "ofrecord_loader", "ofrecord_raw_decoder", "ofrecord_reader",
]
__all__ += ["OneRecDecoder", "onerec", "onerec_decoder", "onerec_reader"]
