"""Decoding one feature of a batch of OneRec examples into one array, as OneFlow's
``onerec_decoder`` kernel did (``user/kernels/onerec_decoder_kernels.cpp``):

* each example's tensor under ``key`` must hold the list type of ``dtype`` (Int8List for
  int8, Int32List, Int64List, Float32List, Float64List): values are copied, never
  converted;
* its per-record shape is the tensor's own shape (as many axes as the decoder's
  ``shape``), or ``reshape`` of its values (one axis may be -1);
* ``batch_padding`` lets the first axis differ between the records of a batch: 0, all
  equal; -1, padded with zeros to the batch's largest; n > 0, padded to n. Its other
  entries must be 0. Without it every record must hold exactly its shape's values;
* the batch's shape must then equal the decoder's ``shape``, or with ``is_dynamic`` fit
  in it: the blob keeps the static shape, zeros after the valid part, and a size says
  how much of its first per-record axis is valid (``aioflow.engine.dynamic_shapes``).

These run on the loader's thread, never on the compute thread.
"""
from __future__ import annotations

import numpy as np

from .ofrecord_decode import DecodeError

__all__ = ["LIST_OF_DTYPE", "FieldDecoder"]

LIST_OF_DTYPE = {np.dtype(np.int8): "Int8List", np.dtype(np.int32): "Int32List",
                 np.dtype(np.int64): "Int64List", np.dtype(np.float32): "Float32List",
                 np.dtype(np.float64): "Float64List"}


class FieldDecoder:
    """One ``OneRecDecoder``: ``decode(examples)`` gives the ``(batch, *shape)`` array,
    ``valid_length(examples)`` the valid size of its first per-record axis."""

    def __init__(self, key: str, dtype: np.dtype, shape: tuple, is_dynamic: bool,
                 reshape: tuple | None, batch_padding: tuple | None, what: str):
        self.key, self.dtype, self.shape = key, np.dtype(dtype), tuple(shape)
        self.is_dynamic, self.reshape, self.batch_padding = is_dynamic, reshape, batch_padding
        self.what = what
        self.kind = LIST_OF_DTYPE[self.dtype]

    def decode(self, examples) -> np.ndarray:
        tensors = self._tensors(examples)
        instance = self._instance_shape(tensors)
        count = int(np.prod(instance))
        dense = np.zeros((len(tensors), count), self.dtype)
        for row, tensor in zip(dense, tensors):
            values = tensor.values
            if len(values) > count or (len(values) < count and self.batch_padding is None):
                raise self._error(f"holds {len(values)} values, its shape {instance} needs "
                                  f"{count}")
            row[:len(values)] = values
        dense = dense.reshape((len(tensors),) + instance)
        if instance == self.shape:
            return dense
        out = np.zeros((len(tensors),) + self.shape, self.dtype)
        out[:, :instance[0]] = dense
        return out

    def valid_length(self, examples) -> np.ndarray:
        return np.array([self._instance_shape(self._tensors(examples))[0]], np.int32)

    # -- steps -------------------------------------------------------------------------------
    def _error(self, text: str) -> DecodeError:
        return DecodeError(f"{self.what}: key {self.key!r} {text}")

    def _tensors(self, examples) -> list:
        tensors = []
        for example in examples:
            tensor = example.get(self.key)
            if tensor is None:
                raise self._error(f"not found in the example (it has {sorted(example)})")
            if tensor.kind != self.kind:
                raise self._error(f"holds a {tensor.kind}, dtype {self.dtype.name} reads a "
                                  f"{self.kind} (OneRec's decoder does not convert types)")
            tensors.append(tensor)
        return tensors

    def _instance_shape(self, tensors) -> tuple:
        """The shape every record of the batch takes, after reshape and padding."""
        dims = [self._dims(tensor) for tensor in tensors]
        firsts = [d[0] for d in dims]
        pad = 0 if self.batch_padding is None else self.batch_padding[0]
        if pad == 0 and len(set(firsts)) > 1:
            raise self._error(f"has first-axis sizes {firsts} in one batch; batch_padding="
                              f"{(-1,) + (0,) * (len(self.shape) - 1)} pads them to the largest")
        if pad > 0 and max(firsts) > pad:
            raise self._error(f"has a first-axis size {max(firsts)}, more than batch_padding's "
                              f"{pad}")
        first = pad if pad > 0 else max(firsts)
        for axis in range(1, len(self.shape)):
            sizes = {d[axis] for d in dims}
            if len(sizes) > 1:
                raise self._error(f"has sizes {sorted(sizes)} along axis {axis} in one batch "
                                  "(only the first axis may be padded)")
        instance = (first,) + tuple(dims[0][1:])
        self._check_fits(instance)
        return instance

    def _dims(self, tensor) -> tuple:
        if self.reshape is None:
            if len(tensor.shape) != len(self.shape):
                raise self._error(f"holds a tensor of shape {tensor.shape}, the decoder's shape "
                                  f"{self.shape} has {len(self.shape)} axes")
            return tuple(tensor.shape)
        count = int(np.prod(tensor.shape))
        known = int(np.prod([d for d in self.reshape if d > 0]))
        free = -1 in self.reshape
        if (count % known) if free else (count != known):
            raise self._error(f"holds a tensor of shape {tensor.shape} ({count} values), which "
                              f"reshape {self.reshape} cannot take")
        return tuple(count // known if d == -1 else d for d in self.reshape)

    def _check_fits(self, instance: tuple) -> None:
        if instance == self.shape:
            return
        if not self.is_dynamic:
            raise self._error(f"gives records of shape {instance}, the decoder's shape is "
                              f"{self.shape} (is_dynamic=True takes smaller ones)")
        if instance[1:] != self.shape[1:] or instance[0] > self.shape[0]:
            raise self._error(
                f"gives records of shape {instance}, which does not fit the decoder's shape "
                f"{self.shape}: aioflow's dynamic blobs vary along one axis, so the records "
                f"must be (n, *{self.shape[1:]}) with n <= {self.shape[0]}")
