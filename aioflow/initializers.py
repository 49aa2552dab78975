"""Variable initializers with OneFlow v0.3's names, signatures and defaults.

An initializer is a small immutable object. Calling it with a shape, a dtype and a
``numpy.random.Generator`` returns a fresh C-contiguous array of exactly that shape
and dtype; random values are drawn in float64 and cast once.

>>> import numpy as np
>>> from aioflow import initializers as init
>>> w = init.truncated_normal(0.1)((256, 784), np.float32, np.random.default_rng(0))
>>> w.shape, w.dtype, bool(np.abs(w).max() < 0.2)
((256, 784), dtype('float32'), True)

Facts taken from OneFlow's source (``python/ops/initializer_util.py`` and the C++
``GenInitialFan`` / ``RngTruncatedNormal`` in ``core/kernel/kernel_util.cpp``):

* fan_in = product of ``shape[1:]`` (the weight layout is ``(out, in, *kernel)``; a
  dense weight is ``(units, in_features)``); fan_out = ``shape[0]`` times the kernel
  size: ``shape[2:]`` for channels_first ("NC..."), ``shape[1:-1]`` for
  channels_last ("N...C"). OneFlow refused ``data_format=""`` for weights of more
  than two axes; aioflow treats it as channels_first (OIHW), the layout its
  conv layers use.
* truncated normal keeps samples with ``|x - mean| < 2 * stddev`` and redraws the rest.
* ``variance_scaling_initializer`` with "truncated_normal" divides the standard
  deviation by 0.87962566103423978, so the *truncated* samples have variance
  ``scale / fan``.
* uniform samples lie in ``[minval, maxval]`` (OneFlow sampled up to
  ``nextafter(maxval)``); integer uniform samples include both ends.
"""
from __future__ import annotations

import math
import numbers
from typing import Optional, Sequence

import numpy as np

from ._core import dtypes as _dtypes

__all__ = [
    "Initializer", "constant_initializer", "zeros_initializer", "ones_initializer",
    "empty_initializer", "random_uniform_initializer", "random_normal_initializer",
    "truncated_normal_initializer", "truncated_normal", "glorot_uniform_initializer",
    "xavier_uniform_initializer", "glorot_normal_initializer", "xavier_normal_initializer",
    "variance_scaling_initializer", "kaiming_initializer",
]

# Standard deviation of a standard normal truncated to (-2, 2); OneFlow's constant.
_TRUNCATED_STD = 0.87962566103423978
_MODES = ("fan_in", "fan_out", "fan_avg")
_DISTRIBUTIONS = ("truncated_normal", "random_normal", "random_uniform")
_NONLINEARITIES = (None, "tanh", "sigmoid", "relu", "leaky_relu")


# ----------------------------------------------------------------------------- checks

def _number(fn: str, name: str, value, *, low=None, low_open=False) -> float:
    """A finite real number (bool refused), optionally bounded below."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}: {name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{fn}: {name} must be finite, got {value!r}")
    if low is not None and (value <= low if low_open else value < low):
        op = ">" if low_open else ">="
        raise ValueError(f"{fn}: {name} must be {op} {low}, got {value!r}")
    return value


def _dtype_arg(fn: str, dtype) -> Optional[np.dtype]:
    if dtype is None:
        return None
    try:
        return _dtypes.as_numpy(dtype)
    except TypeError as err:
        raise TypeError(f"{fn}: dtype: {err}") from None


def _choice(fn: str, name: str, value, allowed: Sequence) -> str:
    lowered = value.lower() if isinstance(value, str) else value
    if lowered not in allowed:
        raise ValueError(f"{fn}: {name} must be one of {list(allowed)}, got {value!r}")
    return lowered


def _data_format(fn: str, data_format, *, allow_empty: bool) -> str:
    """OneFlow's rule: "NC..." is channels_first, "N...C" channels_last."""
    if not isinstance(data_format, str):
        raise TypeError(f"{fn}: data_format must be a str, got {data_format!r}")
    if data_format in ("channels_first", "channels_last"):
        return data_format
    upper = data_format.upper()
    if upper.startswith("NC"):
        return "channels_first"
    if len(upper) > 1 and upper.startswith("N") and upper.endswith("C"):
        return "channels_last"
    if data_format == "" and allow_empty:
        return ""
    expected = '"NC..." (e.g. "NCHW"), "N...C" (e.g. "NHWC")' + (' or ""' if allow_empty else "")
    raise ValueError(f"{fn}: data_format must be {expected}, got {data_format!r}")


def _fan(shape: tuple, mode: str, data_format: str) -> float:
    """OneFlow's fan for a weight laid out (out, in, *kernel) or (out, *kernel, in)."""
    if not shape:
        return 1.0
    fan_in = math.prod(shape[1:])
    kernel = shape[1:-1] if data_format == "channels_last" else shape[2:]
    fan_out = shape[0] * math.prod(kernel)
    if mode == "fan_in":
        return float(fan_in)
    if mode == "fan_out":
        return float(fan_out)
    return (fan_in + fan_out) / 2.0


def _truncated_normal(rng, mean: float, std: float, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """Rejection sampling: draws outside (mean - 2 std, mean + 2 std) are redrawn.

    The bound is tested after the cast, so rounding to a narrow dtype cannot push a
    kept sample onto the bound. Should the dtype hold no value inside the interval
    (std far below its resolution at ``mean``), the test falls back to the float64 draw.
    """
    out = np.empty(shape, dtype=dtype)
    flat = out.reshape(-1)  # a view: filling it fills out
    filled, after_cast = 0, True
    while filled < flat.size:
        need = flat.size - filled
        raw = rng.normal(mean, std, size=need + need // 16 + 16)
        cast = raw.astype(dtype)
        tested = cast.astype(np.float64) if after_cast else raw
        kept = cast[np.abs(tested - mean) < 2.0 * std][:need]
        # 16+ draws with none inside 2 std has probability < 1e-21 unless rounding is at fault.
        after_cast = after_cast and kept.size > 0
        flat[filled:filled + kept.size] = kept
        filled += kept.size
    return out


# ------------------------------------------------------------------------ base class

class Initializer:
    """Base class. ``init(shape, dtype, rng)`` returns a new array of that shape/dtype.

    ``shape`` is a tuple of non-negative ints, ``dtype`` a numpy or aioflow dtype,
    ``rng`` a ``numpy.random.Generator`` (``None``: a fresh unseeded one). An
    initializer made with a ``seed`` ignores ``rng`` and draws from
    ``np.random.default_rng(seed)`` on every call, so it always yields the same values.

    >>> import numpy as np
    >>> from aioflow.initializers import ones_initializer
    >>> ones_initializer()((2, 3), np.float32, np.random.default_rng(0))
    array([[1., 1., 1.],
           [1., 1., 1.]], dtype=float32)
    """

    _fn = "initializer"
    seed: Optional[int] = None
    dtype: Optional[np.dtype] = None

    def __call__(self, shape, dtype, rng: Optional[np.random.Generator] = None) -> np.ndarray:
        shape = self._check_shape(shape)
        dtype = self._check_call_dtype(dtype)
        if self.seed is not None:
            rng = np.random.default_rng(self.seed)
        elif rng is None:
            rng = np.random.default_rng()
        elif not isinstance(rng, np.random.Generator):
            raise TypeError(f"{self._fn}: rng must be a numpy.random.Generator, got {type(rng).__name__}")
        if math.prod(shape) == 0:
            return np.zeros(shape, dtype=dtype)
        values = self._generate(shape, dtype, rng)  # float64 (or int64) unless already dtype
        out = values.astype(dtype, copy=False)
        return out if out.flags.c_contiguous else out.copy(order="C")

    def _generate(self, shape: tuple, dtype: np.dtype, rng) -> np.ndarray:
        """A new array of ``shape``, in ``dtype`` or in float64 / int64 to be cast once."""
        raise NotImplementedError

    def _params(self) -> dict:
        raise NotImplementedError

    def _check_shape(self, shape) -> tuple:
        try:
            dims = tuple(shape)
        except TypeError:
            raise TypeError(f"{self._fn}: shape must be a tuple of ints, got {shape!r}") from None
        for dim in dims:
            if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
                raise TypeError(f"{self._fn}: shape must be a tuple of ints, got {shape!r}")
            if dim < 0:
                raise ValueError(f"{self._fn}: shape dimensions must be >= 0, got {shape!r}")
        return tuple(int(d) for d in dims)

    def _check_call_dtype(self, dtype) -> np.dtype:
        try:
            return _dtypes.as_numpy(dtype)
        except TypeError as err:
            raise TypeError(f"{self._fn}: dtype: {err}") from None

    def _require_float(self, dtype: np.dtype) -> None:
        if dtype.kind != "f":
            raise TypeError(
                f"{self._fn} draws real numbers and needs a floating-point variable, "
                f"got dtype {dtype.name}")

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self._params() == other._params()

    def __hash__(self) -> int:
        return hash((type(self), tuple(self._params().items())))


# ---------------------------------------------------------------------- concrete kinds

class ConstantInitializer(Initializer):
    """Every element equals ``value``; see :func:`constant_initializer`."""

    _fn = "constant_initializer"

    def __init__(self, value: float = 0, dtype=None):
        self.dtype = _dtype_arg(self._fn, dtype)
        value = _number(self._fn, "value", value)
        # OneFlow stored int(value) for an integer dtype (constant_int_conf).
        self.value = int(value) if self.dtype is not None and self.dtype.kind in "iu" else value

    def _generate(self, shape, dtype, rng):
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            if self.value != int(self.value) or not info.min <= self.value <= info.max:
                raise ValueError(
                    f"{self._fn}: value {self.value!r} is not representable in {dtype.name}; "
                    f"expected an integer in [{info.min}, {info.max}]")
            return np.full(shape, int(self.value), dtype=dtype)
        return np.full(shape, self.value, dtype=dtype)

    def _params(self):
        return {"value": self.value, "dtype": self.dtype}


class EmptyInitializer(ConstantInitializer):
    """OneFlow left the memory untouched; aioflow fills zeros so runs are repeatable."""

    _fn = "empty_initializer"

    def __init__(self, dtype=None):
        super().__init__(0, dtype)

    def _params(self):
        return {"dtype": self.dtype}


class RandomUniformInitializer(Initializer):
    """Uniform in ``[minval, maxval]``; integers when made with an integer dtype."""

    _fn = "random_uniform_initializer"

    def __init__(self, minval: float = 0, maxval: float = 1, dtype=None):
        self.dtype = _dtype_arg(self._fn, dtype)
        minval = _number(self._fn, "minval", minval)
        maxval = _number(self._fn, "maxval", maxval)
        if minval > maxval:
            raise ValueError(f"{self._fn}: minval must be <= maxval, got minval={minval!r} "
                             f"> maxval={maxval!r}")
        self.integer = self.dtype is not None and self.dtype.kind in "iu"
        if self.integer:  # OneFlow's random_uniform_int_conf stored int(minval), int(maxval)
            minval, maxval = int(minval), int(maxval)
        self.minval, self.maxval = minval, maxval

    def _generate(self, shape, dtype, rng):
        if self.integer:
            if dtype.kind in "iu":
                info = np.iinfo(dtype)
                if self.minval < info.min or self.maxval > info.max:
                    raise ValueError(
                        f"{self._fn}: range [{self.minval}, {self.maxval}] does not fit "
                        f"{dtype.name}; expected bounds within [{info.min}, {info.max}]")
            return rng.integers(self.minval, self.maxval, size=shape, endpoint=True)
        self._require_float(dtype)
        return rng.uniform(self.minval, np.nextafter(self.maxval, math.inf), size=shape)

    def _params(self):
        return {"minval": self.minval, "maxval": self.maxval, "dtype": self.dtype}


class RandomNormalInitializer(Initializer):
    """Normal ``N(mean, stddev**2)``; see :func:`random_normal_initializer`."""

    _fn = "random_normal_initializer"

    def __init__(self, mean: float = 0.0, stddev: float = 1.0, seed=None, dtype=None):
        self.mean = _number(self._fn, "mean", mean)
        # OneFlow's RngNormal does CHECK_GT(std, 0).
        self.stddev = _number(self._fn, "stddev", stddev, low=0.0, low_open=True)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)
                                 or seed < 0):
            raise ValueError(f"{self._fn}: seed must be None or an int >= 0, got {seed!r}")
        self.seed = None if seed is None else int(seed)
        self.dtype = _dtype_arg(self._fn, dtype)
        if self.dtype is not None and self.dtype.kind != "f":
            raise ValueError(f"{self._fn}: dtype must be a floating-point type, got {self.dtype.name}")

    def _generate(self, shape, dtype, rng):
        self._require_float(dtype)
        return rng.normal(self.mean, self.stddev, size=shape)

    def _params(self):
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed, "dtype": self.dtype}


class TruncatedNormalInitializer(Initializer):
    """Normal ``N(mean, stddev**2)`` with draws beyond 2 ``stddev`` of the mean redrawn.

    The samples' own standard deviation is about ``0.8796 * stddev``.
    """

    _fn = "truncated_normal_initializer"

    def __init__(self, mean: float = 0.0, stddev: float = 1.0):
        self.mean = _number(self._fn, "mean", mean)
        self.stddev = _number(self._fn, "stddev", stddev, low=0.0, low_open=True)

    def _generate(self, shape, dtype, rng):
        self._require_float(dtype)
        return _truncated_normal(rng, self.mean, self.stddev, shape, dtype)

    def _params(self):
        return {"mean": self.mean, "stddev": self.stddev}


class VarianceScalingInitializer(Initializer):
    """Zero-mean values whose variance is ``scale / n``, n the fan chosen by ``mode``."""

    _fn = "variance_scaling_initializer"

    def __init__(self, scale: float = 1.0, mode: str = "fan_in",
                 distribution: str = "truncated_normal", data_format: str = ""):
        self.scale = _number(self._fn, "scale", scale, low=0.0, low_open=True)
        self.mode = _choice(self._fn, "mode", mode, _MODES)
        self.distribution = _choice(self._fn, "distribution", distribution, _DISTRIBUTIONS)
        self.data_format = data_format
        self._layout = _data_format(self._fn, data_format, allow_empty=True)

    def _generate(self, shape, dtype, rng):
        self._require_float(dtype)
        variance = self.scale / _fan(shape, self.mode, self._layout)
        if self.distribution == "truncated_normal":
            return _truncated_normal(rng, 0.0, math.sqrt(variance) / _TRUNCATED_STD, shape, dtype)
        if self.distribution == "random_normal":
            return rng.normal(0.0, math.sqrt(variance), size=shape)
        limit = math.sqrt(3.0 * variance)
        return rng.uniform(-limit, limit, size=shape)

    def _params(self):
        return {"scale": self.scale, "mode": self.mode, "distribution": self.distribution,
                "data_format": self.data_format}


# ------------------------------------------------------------- OneFlow's public names

def constant_initializer(value: float = 0, dtype=_dtypes.float) -> ConstantInitializer:
    """Fill with ``value``. With an integer ``dtype`` the value is truncated (``int(value)``).

    >>> import numpy as np
    >>> from aioflow.initializers import constant_initializer
    >>> constant_initializer(2.5)((3,), np.float32, None)
    array([2.5, 2.5, 2.5], dtype=float32)
    """
    return ConstantInitializer(value, dtype)


def zeros_initializer(dtype=_dtypes.float) -> ConstantInitializer:
    """Fill with 0.

    >>> import numpy as np
    >>> from aioflow.initializers import zeros_initializer
    >>> zeros_initializer()((2,), np.int32, None)
    array([0, 0], dtype=int32)
    """
    return ConstantInitializer(0.0, dtype)


def ones_initializer(dtype=_dtypes.float) -> ConstantInitializer:
    """Fill with 1.

    >>> import numpy as np
    >>> from aioflow.initializers import ones_initializer
    >>> ones_initializer()((2,), np.float64, None)
    array([1., 1.])
    """
    return ConstantInitializer(1.0, dtype)


def empty_initializer(dtype=_dtypes.float) -> EmptyInitializer:
    """No particular values (OneFlow left memory as it was); aioflow gives zeros.

    >>> import numpy as np
    >>> from aioflow.initializers import empty_initializer
    >>> empty_initializer()((2,), np.float32, None).shape
    (2,)
    """
    return EmptyInitializer(dtype)


def random_uniform_initializer(minval: float = 0, maxval: float = 1,
                               dtype=_dtypes.float) -> RandomUniformInitializer:
    """Uniform values in ``[minval, maxval]``; integers (both ends included) for an int dtype.

    >>> import numpy as np
    >>> from aioflow.initializers import random_uniform_initializer
    >>> x = random_uniform_initializer(-0.5, 0.5)((1000,), np.float32, np.random.default_rng(1))
    >>> bool(x.min() >= -0.5 and x.max() <= 0.5)
    True
    """
    return RandomUniformInitializer(minval, maxval, dtype)


def random_normal_initializer(mean: float = 0.0, stddev: float = 1.0, seed: Optional[int] = None,
                              dtype=None) -> RandomNormalInitializer:
    """Normal values with the given mean and standard deviation (``stddev > 0``).

    OneFlow v0.3 accepted ``seed`` and ``dtype`` but asserted both were None; aioflow
    honours them: a seeded initializer yields the same values on every call.

    >>> import numpy as np
    >>> from aioflow.initializers import random_normal_initializer
    >>> init = random_normal_initializer(0.0, 0.02, seed=7)
    >>> bool((init((4,), np.float32, None) == init((4,), np.float32, None)).all())
    True
    """
    return RandomNormalInitializer(mean, stddev, seed, dtype)


def truncated_normal_initializer(mean: float = 0.0, stddev: float = 1.0) -> TruncatedNormalInitializer:
    """Normal values; any draw farther than ``2 * stddev`` from ``mean`` is redrawn.

    >>> import numpy as np
    >>> from aioflow.initializers import truncated_normal_initializer
    >>> x = truncated_normal_initializer(1.0, 0.5)((10000,), np.float64, np.random.default_rng(0))
    >>> bool(np.abs(x - 1.0).max() < 1.0)
    True
    """
    return TruncatedNormalInitializer(mean, stddev)


def truncated_normal(stddev: float = 1.0) -> TruncatedNormalInitializer:
    """``flow.truncated_normal(stddev)``: a zero-mean truncated normal (the seeds' favourite).

    >>> import numpy as np
    >>> from aioflow.initializers import truncated_normal
    >>> truncated_normal(0.1)
    TruncatedNormalInitializer(mean=0.0, stddev=0.1)
    """
    return TruncatedNormalInitializer(0.0, stddev)


def glorot_uniform_initializer(data_format: str = "") -> VarianceScalingInitializer:
    """Xavier/Glorot uniform: ``U(-sqrt(6 / (fan_in + fan_out)), +sqrt(...))``.

    Also exported as ``xavier_uniform_initializer``. ``data_format`` ("NCHW", "NHWC",
    or "" for dense weights) says where the input channels sit in a conv weight.

    >>> import numpy as np
    >>> from aioflow.initializers import xavier_uniform_initializer
    >>> w = xavier_uniform_initializer()((30, 70), np.float32, np.random.default_rng(0))
    >>> bool(np.abs(w).max() <= np.sqrt(6 / 100))
    True
    """
    return VarianceScalingInitializer(1.0, "fan_avg", "random_uniform", data_format)


def glorot_normal_initializer(data_format: str = "") -> VarianceScalingInitializer:
    """Xavier/Glorot normal: ``N(0, 2 / (fan_in + fan_out))``. Also ``xavier_normal_initializer``.

    >>> import numpy as np
    >>> from aioflow.initializers import xavier_normal_initializer
    >>> xavier_normal_initializer("NCHW")((8, 4, 3, 3), np.float32, None).shape
    (8, 4, 3, 3)
    """
    return VarianceScalingInitializer(1.0, "fan_avg", "random_normal", data_format)


xavier_uniform_initializer = glorot_uniform_initializer
xavier_normal_initializer = glorot_normal_initializer


def variance_scaling_initializer(scale: float = 1.0, mode: str = "fan_in",
                                 distribution: str = "truncated_normal",
                                 data_format: str = "") -> VarianceScalingInitializer:
    """Values of variance ``scale / n``: n is fan_in, fan_out or their mean (``mode``).

    ``distribution`` is "truncated_normal" (its stddev is widened by 1/0.8796 before
    truncation, as in OneFlow and TensorFlow), "random_normal" or "random_uniform"
    (limit ``sqrt(3 * scale / n)``). Mode and distribution are case-insensitive.

    >>> import numpy as np
    >>> from aioflow.initializers import variance_scaling_initializer
    >>> he = variance_scaling_initializer(2.0, "fan_in", "random_normal")
    >>> w = he((512, 2048), np.float64, np.random.default_rng(0))
    >>> bool(abs(w.std() / np.sqrt(2 / 2048) - 1) < 0.01)
    True
    """
    return VarianceScalingInitializer(scale, mode, distribution, data_format)


def kaiming_initializer(shape: Sequence[int], distribution: str = "random_normal",
                        mode: str = "fan_in", nonlinearity: Optional[str] = "leaky_relu",
                        negative_slope: float = 0.0, data_format: str = "NCHW") -> Initializer:
    """He et al. (2015): std = gain / sqrt(fan), fan computed from ``shape`` given here.

    As in OneFlow, the result is a plain normal (``N(0, std**2)``) or uniform
    (``U(-sqrt(3) std, sqrt(3) std)``) initializer; the shape passed when it is
    called only sets the output's shape. gain: 1 for None or "sigmoid", 5/3 for
    "tanh", sqrt(2) for "relu", sqrt(2 / (1 + negative_slope**2)) for "leaky_relu".

    >>> import numpy as np
    >>> from aioflow.initializers import kaiming_initializer
    >>> init = kaiming_initializer((64, 32, 3, 3), nonlinearity="relu")
    >>> round(init.stddev ** 2 * 32 * 9, 6)
    2.0
    """
    fn = "kaiming_initializer"
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        raise TypeError(f"{fn}: shape must be a tuple of ints, got {shape!r}")
    if len(shape) < 2 or any(isinstance(d, bool) or not isinstance(d, numbers.Integral) or d <= 0
                             for d in shape):
        raise ValueError(f"{fn}: shape must have >= 2 positive int dimensions "
                         f"(a dense or conv weight), got {tuple(shape)!r}")
    distribution = _choice(fn, "distribution", distribution, ("random_normal", "random_uniform"))
    mode = _choice(fn, "mode", mode, _MODES)
    if nonlinearity not in _NONLINEARITIES:
        raise ValueError(f"{fn}: nonlinearity must be one of {list(_NONLINEARITIES)}, "
                         f"got {nonlinearity!r}")
    slope = _number(fn, "negative_slope", negative_slope)
    layout = _data_format(fn, data_format, allow_empty=False)
    if nonlinearity in (None, "sigmoid"):
        gain = 1.0
    elif nonlinearity == "tanh":
        gain = 5.0 / 3
    elif nonlinearity == "relu":
        gain = math.sqrt(2.0)
    else:
        gain = math.sqrt(2.0 / (1 + slope ** 2))
    std = gain / math.sqrt(_fan(tuple(int(d) for d in shape), mode, layout))
    if distribution == "random_normal":
        return RandomNormalInitializer(0.0, std)
    bound = math.sqrt(3.0) * std
    return RandomUniformInitializer(-bound, bound)
