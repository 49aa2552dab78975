"""Saving, loading and inspecting variables (``flow.checkpoint``, ``flow.train.CheckPoint``).

On disk: OneFlow's layout, one folder per variable with ``out`` (raw little-endian bytes)
and ``meta`` (shape and dtype), plus an empty ``snapshot_done``; see
:mod:`aioflow.checkpoint.io`. Every function here first compiles the jobs defined so far
(so their variables exist) and waits for pending steps.

>>> import numpy as np, tempfile, os, aioflow as flow, aioflow.typing as tp
>>> flow.clear_default_session()
>>> @flow.global_function(type="predict")
... def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
...     return x + flow.get_variable("b", shape=(2,), initializer=flow.zeros_initializer())
>>> flow.load_variables({"b": np.array([1, 2], np.float32)})
>>> path = os.path.join(tempfile.mkdtemp(), "ckpt")
>>> flow.checkpoint.save(path)
>>> flow.load_variables({"b": np.zeros(2, np.float32)})
>>> flow.train.CheckPoint().load(path)
>>> job(np.zeros(2, np.float32)).tolist()
[1.0, 2.0]
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from . import io as checkpoint_io
from . import ranks
from .io import CheckpointError, CheckpointWarning
from .thread import checkpoint_entry
from .._core.callsite import user_stacklevel
from ..engine.session import default_session
from ..optimizer import SLOT_NAMES


__all__ = [
    "get_all_variables",
    "save",
    "get",
    "load_variables",
    "CheckPoint",
    "CheckpointMismatchError",
]


class CheckpointMismatchError(CheckpointError):
    """A checkpoint's variables are not the session's: ``missing`` (variables of the
    session it has no value for) and ``unexpected`` (variables it holds that the session
    does not have), both sorted lists of names."""

    def __init__(self, message: str, missing: list[str], unexpected: list[str]):
        super().__init__(message)
        self.missing = missing
        self.unexpected = unexpected


def _ready_session():
    session = default_session()
    session.sync()
    session.compile_all()
    session.initialize_missing()
    return session


@checkpoint_entry
def get_all_variables() -> dict[str, np.ndarray]:
    """A copy of every variable's value, by name."""
    session = _ready_session()
    with session.lock:
        return {name: record.host_value() for name, record in session.variables.items()}


@checkpoint_entry
@ranks.rank0_writes("saving a checkpoint", prepare=_ready_session)
def save(path, var_dict=None, overwrite: bool = False) -> None:
    """Save every variable (or the arrays of ``var_dict``) to the directory ``path``.

    ``path`` must not exist or be empty (as in OneFlow) unless ``overwrite=True``, which
    replaces an existing checkpoint directory; the write is atomic.
    """
    if var_dict is None:
        session = _ready_session()
        with session.lock:
            arrays = {name: record.host_value()
                      for name, record in session.variables.items()}
    else:
        arrays = {name: np.asarray(value) for name, value in var_dict.items()}
    checkpoint_io.save_arrays(os.fspath(path), arrays, overwrite=overwrite)


@checkpoint_entry
@ranks.every_rank_reads("reading a checkpoint")
def get(path) -> dict[str, np.ndarray]:
    """Read a checkpoint directory into a dict of arrays (nothing is assigned)."""
    return checkpoint_io.read_arrays(os.fspath(path))


@checkpoint_entry
def load_variables(value_dict, ignore_mismatch: bool = True) -> None:
    """Assign variables from a dict of arrays (e.g. from ``flow.checkpoint.get``).

    Every value is checked before any variable changes: shapes must match; dtypes must
    match or be a same-kind conversion (float64 -> float32). Names that are not variables
    are skipped when ``ignore_mismatch`` is true and refused otherwise.
    """
    session = _ready_session()
    with session.lock:
        updates = {}
        for name, value in value_dict.items():
            record = session.variables.get(name)
            if record is None:
                if ignore_mismatch:
                    continue
                raise KeyError(f"load_variables: {name!r} is not a variable of this session "
                               f"(variables: {sorted(session.variables)})")
            updates[name] = _checked_value(record, value)
        for name, value in updates.items():
            session.variables[name].assign_host(value)


def _checked_value(record, value) -> np.ndarray:
    value = np.asarray(getattr(value, "numpy", lambda: value)())
    if value.shape != record.shape:
        raise ValueError(f"load_variables: variable {record.name!r} has shape {record.shape}, "
                         f"the value has shape {value.shape}")
    want = record.dtype.numpy
    if value.dtype != want and not np.can_cast(value.dtype, want, casting="same_kind"):
        raise TypeError(f"load_variables: variable {record.name!r} is {want}, the value is "
                        f"{value.dtype}")
    return value.astype(want, copy=False)


class CheckPoint:
    """OneFlow's checkpoint object: ``init()``, ``save(path)``, ``load(path)``."""

    @checkpoint_entry
    def init(self) -> None:
        """Compile every job defined so far and (re)initialize all variables."""
        session = default_session()
        session.sync()
        session.compile_all()
        with session.lock:
            session.initialize()

    @checkpoint_entry
    def save(self, path, overwrite: bool = False) -> None:
        """Save all variables to ``path`` (which must not exist or be empty, unless
        ``overwrite=True`` replaces an earlier checkpoint there)."""
        save(path, overwrite=overwrite)

    @checkpoint_entry
    @ranks.every_rank_reads("loading a checkpoint")
    def load(self, path, strict: bool = True) -> None:
        """Load every variable of the session from ``path``, all or nothing.

        Strict by default (as PyTorch's ``load_state_dict``): when a variable of the
        session -- model variable, optimizer slot or step counter -- has no value in the
        checkpoint, or the checkpoint holds variables the session does not have, one
        :class:`CheckpointMismatchError` lists the missing and the unexpected names and
        nothing changes. One exception keeps the seeds' eval scripts working: a session
        with no training state (only predict jobs) ignores the optimizer slots and step
        counters of a checkpoint saved by training.

        ``strict=False`` loads what matches and warns (:class:`CheckpointWarning`) with the
        same lists; variables missing from the checkpoint keep their values, except
        optimizer slots and step counters, which restart from zero (state that belonged
        to the replaced weights). Either way a variable present with the wrong shape,
        data type, size or checksum is refused and nothing changes.
        """
        path = os.fspath(path)
        session = _ready_session()
        if not session.variables:
            raise RuntimeError(
                "CheckPoint.load: this session has no variables to load into; define the "
                "job functions first (after flow.clear_default_session(), jobs defined "
                "before it must be called or defined again)")
        with session.lock:
            on_disk = set(checkpoint_io.variable_names(path))
            missing = sorted(set(session.variables) - on_disk)
            unexpected = sorted(name for name in on_disk - set(session.variables)
                                if not _foreign_training_state(name, session))
            if (missing or unexpected) and strict:
                raise CheckpointMismatchError(
                    _mismatch(path, missing, unexpected) + "; nothing was loaded (pass "
                    "strict=False to load the variables that match)", missing, unexpected)
            expected = {name: (record.shape, record.dtype.numpy)
                        for name, record in session.variables.items() if name in on_disk}
            values = checkpoint_io.read_arrays(path, expected)   # validates all first
            if missing or unexpected:
                warnings.warn(_mismatch(path, missing, unexpected) + "; loaded the "
                              "variables that match (strict=False)", CheckpointWarning,
                              stacklevel=user_stacklevel())
            for name, record in session.variables.items():
                if name in values:
                    record.assign_host(values[name])
                elif record.is_state:
                    record.assign_host(0)


def _mismatch(path, missing, unexpected) -> str:
    parts = []
    if missing:
        parts.append(f"missing from the checkpoint ({len(missing)}): {missing}")
    if unexpected:
        parts.append(f"unexpected in the checkpoint, not variables of this session "
                     f"({len(unexpected)}): {unexpected}")
    return f"checkpoint {path!r} does not match the session's variables: " + "; ".join(parts)


def _foreign_training_state(name: str, session) -> bool:
    """Whether ``name`` is training state (a step counter or an optimizer slot of one of
    the session's variables) that a session without any training state may ignore: an
    inference script loading what a training script saved."""
    if any(record.is_state for record in session.variables.values()):
        return False
    if name.startswith("System-Train-"):   # step counters, loss scales (aioflow/optimizer)
        return True
    base, _, slot = name.rpartition("-")
    return slot in SLOT_NAMES and base in session.variables
