"""Saving, loading and inspecting variables (``flow.checkpoint``, ``flow.train.CheckPoint``).

On disk: OneFlow's layout, one folder per variable with ``out`` (raw little-endian bytes)
and ``meta`` (shape and dtype), plus an empty ``snapshot_done``; see
:mod:`aioflow.checkpoint_io`. Every function here first compiles the jobs defined so far
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

import numpy as np

from . import checkpoint_io
from .runtime.results import blocking_entry
from .session import default_session


__all__ = [
    "get_all_variables",
    "save",
    "get",
    "load_variables",
    "CheckPoint",
]


def _ready_session():
    session = default_session()
    session.sync()
    session.compile_all()
    session.initialize_missing()
    return session


@blocking_entry
def get_all_variables() -> dict[str, np.ndarray]:
    """A copy of every variable's value, by name."""
    session = _ready_session()
    with session.lock:
        return {name: record.host_value() for name, record in session.variables.items()}


@blocking_entry
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


@blocking_entry
def get(path) -> dict[str, np.ndarray]:
    """Read a checkpoint directory into a dict of arrays (nothing is assigned)."""
    return checkpoint_io.read_arrays(os.fspath(path))


@blocking_entry
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

    @blocking_entry
    def init(self) -> None:
        """Compile every job defined so far and (re)initialize all variables."""
        session = default_session()
        session.sync()
        session.compile_all()
        with session.lock:
            session.initialize()

    @blocking_entry
    def save(self, path, overwrite: bool = False) -> None:
        """Save all variables to ``path`` (which must not exist or be empty, unless
        ``overwrite=True`` replaces an earlier checkpoint there)."""
        save(path, overwrite=overwrite)

    @blocking_entry
    def load(self, path) -> None:
        """Load all variables from ``path``; nothing changes unless every file is valid.

        Model variables must all be present; optimizer state and step counters missing
        from the checkpoint start from zero.
        """
        path = os.fspath(path)
        session = _ready_session()
        if not session.variables:
            raise RuntimeError(
                "CheckPoint.load: this session has no variables to load into; define the "
                "job functions first (after flow.clear_default_session(), jobs defined "
                "before it must be called or defined again)")
        with session.lock:
            expected = {
                name: (record.shape, record.dtype.numpy)
                for name, record in session.variables.items()
                if not record.is_state or os.path.isdir(os.path.join(path, name))
            }
            values = checkpoint_io.read_arrays(path, expected)
            for name, record in session.variables.items():
                if name in values:
                    record.assign_host(values[name])
                else:
                    record.assign_host(0)
