"""Model variables: named, shared by every job of a session, created through one helper.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> flow.clear_default_session()
>>> @flow.global_function(type="predict")
... def scale(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
...     w = flow.get_variable("w", shape=(3,), initializer=flow.ones_initializer())
...     return x * w
>>> scale(np.arange(3, dtype=np.float32)).tolist()
[0.0, 1.0, 2.0]
>>> sorted(flow.get_all_variables())
['w']
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._core import dtypes
from ..ir import Blob, current_graph
from ..ops.state import variable
from ..ir.distribute import assert_is_valid_distribute
from .function_settings import initializer_from_conf


@dataclass
class VariableRecord:
    """What the session knows about one variable; ``value`` is None until initialized."""

    name: str
    shape: tuple[int, ...]
    dtype: dtypes.DType
    initializer: Any
    trainable: bool = True
    is_state: bool = False  # optimizer slot or counter: may be absent from a checkpoint
    # Kept in host memory whatever the job's backend: a step counter, which the learning
    # rate schedule reads on the host (reading it from a GPU would stall every step).
    on_host: bool = False
    # The value: an array of ``backend`` (None until initialized); numpy when ``on_host``.
    value: Any = field(default=None, repr=False)
    backend: Any = field(default=None, repr=False)

    def describe(self) -> str:
        return f"{self.dtype.name}{list(self.shape)}"

    def host_value(self) -> np.ndarray:
        """A numpy copy of the value (from wherever it lives)."""
        if isinstance(self.value, np.ndarray):
            return self.value.copy()
        return self.backend.to_host(self.value)

    def assign_host(self, host_array) -> None:
        """Overwrite the value in place from a numpy array of its shape (or a scalar)."""
        if isinstance(self.value, np.ndarray):
            self.value[...] = host_array
        else:
            self.backend.assign(self.value, np.broadcast_to(
                np.asarray(host_array, dtype=self.dtype.numpy), self.shape))

    def place(self, host_array: np.ndarray, backend) -> None:
        """Set the value from a fresh host array, on ``backend`` (or the host)."""
        if self.on_host or backend.owns(host_array):
            self.value, self.backend = host_array, backend
        else:
            self.value, self.backend = backend.to_device(host_array), backend

    def move_to(self, backend) -> None:
        """Make the value live on ``backend`` (a copy through the host, once)."""
        if self.value is None or self.backend is backend:
            return
        if self.on_host:
            self.backend = backend
            return
        self.place(self.host_value(), backend)


def get_variable(name: str, shape=None, dtype=None, initializer=None,
                 regularizer=None, trainable: bool = True, model_name=None,
                 random_seed=None, distribute=None, reuse: bool = True) -> Blob:
    """Create (or reuse, by name) a variable and return a Blob reading it.

    Variables with the same name are one variable across all jobs of the session; a
    second declaration must agree on shape and dtype. Inside ``flow.scope.namespace("a")``
    the variable is named ``a-<name>`` (OneFlow's rule), so same-named variables of two
    namespaces are two variables. Without an initializer, floating
    variables start from ``glorot_uniform`` (zeros for integer ones). A ``regularizer``
    (``flow.regularizers.l2(...)``) adds its penalty to the job's training loss.
    """
    graph = current_graph()
    if not isinstance(name, str) or not name:
        raise ValueError(f"get_variable: name must be a non-empty string, got {name!r}")
    if shape is None:
        raise ValueError(f"get_variable({name!r}): shape is required")
    if distribute is not None:   # a layout hint: variables are whole on each device
        assert_is_valid_distribute(distribute, f"get_variable({name!r}) distribute")
    name = graph.namespace_prefix() + name
    shape = (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)
    if dtype is None:  # the job's function_config().default_data_type (float32 by default)
        dtype = graph.config.default_data_type() if graph.config is not None else dtypes.float32
    dtype = dtypes.convert(dtype)
    if initializer is None and graph.config is not None:
        # function_config.default_initializer_conf: OneFlow's initializer of variables
        # declared without one (a job's own default, before aioflow's).
        conf = graph.config.setting("default_initializer_conf")
        if conf is not None:
            initializer = initializer_from_conf("default_initializer_conf", conf)
    record = graph.session.declare_variable(name, shape, dtype, initializer, trainable, graph)
    graph.variable_trainable.setdefault(name, bool(trainable))
    cached = graph.variable_blobs.get(name)
    if cached is None:
        cached = read_declared(name)
        if regularizer is not None:
            graph.regularization_losses.append(regularizer(cached))
    # flow.experimental.scope.config under function_config.enable_ssp: the stage reads the
    # variable some steps late (set by the block, a hook from above; None elsewhere)
    hook = graph.variable_read_hook
    return cached if hook is None else hook(name, cached)


def read_declared(name: str) -> Blob:
    """A Blob reading the variable the session declared as ``name``, exactly that name
    (no namespace prefix): for aioflow's own state variables (optimizer slots, step
    counters), named after the variable or job they serve, whatever namespace is open."""
    graph = current_graph()
    cached = graph.variable_blobs.get(name)
    if cached is not None:
        return cached
    record = graph.session.variables[name]
    blob = variable(name=name, var=name, shape=record.shape, dtype=record.dtype)
    graph.variable_blobs[name] = blob
    return blob
