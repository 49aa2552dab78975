"""The default session: variables, defined jobs, their compiled forms, and randomness.

``flow.clear_default_session()`` starts a fresh one (jobs defined before are traced again
into the new session on their next call, a convenience OneFlow did not offer).
"""
from __future__ import annotations

import atexit
import logging
import threading

import numpy as np

from .. import backends
from .._core import settings
from .._core import dtypes
from .._core.warn import warn_once as warn_once  # re-exported: tests reset it here
from .._core import seeds
from ..runtime.pipeline import Pipeline, SessionLock
from ..runtime.results import blocking_entry
from .variables import VariableRecord
from ..distributed import is_distributed
from ..distributed.collectives import broadcast_arrays
from ..initializers import glorot_uniform_initializer

log = logging.getLogger("aioflow")


class ExecContext:
    """What kernels see: the backend's array module, randomness and the session's
    variables (one context per backend a session's jobs run on)."""

    def __init__(self, session: "Session", backend: backends.Backend):
        self.session = session
        self.backend = backend
        self.xp = backend.xp
        self._rngs: dict = {}
        self._kernel_states: dict = {}

    def variable(self, name: str):
        return self.session.variables[name].value

    def kernel_state(self, key, make):
        """The state a stateful kernel keeps from step to step (OneFlow's OpKernelState):
        ``make()``'s result the first time ``key`` is asked for, the same object after."""
        state = self._kernel_states.get(key)
        if state is None:
            state = self._kernel_states[key] = make()
        return state

    def rng_for(self, seed):
        """A generator on the backend's device: one per ``seed``, advancing from step to
        step; unseeded ops share one drawn from the session's generator, so a seeded
        session (``flow.random.seed``) repeats its dropout masks too."""
        rng = self._rngs.get(seed)
        if rng is None:
            if seed is None and self.backend.name == "numpy":
                return self.session.rng
            start = seed if seed is not None else int(self.session.rng.integers(2 ** 63))
            rng = self._rngs[seed] = self.backend.random_generator(start)
        return rng


class Session:
    def __init__(self):
        self.variables: dict[str, VariableRecord] = {}
        self.jobs: list = []  # JobFunction objects, in definition order
        # id(JobFunction) -> CompiledJob; (id, actual shapes) -> a dynamic-input variant
        self.compiled: dict = {}
        self.rng = seeds.session_generator()
        self.lock = SessionLock()   # steps run under it (runtime/pipeline.py)
        # One execution context per backend the session's jobs run on (backends/).
        self._contexts: dict[str, ExecContext] = {}
        # Bumped whenever a variable moves between backends: a compiled job re-checks
        # where its variables live only when this changed since its last step.
        self.placement_version = 0
        self.pending_errors: list[BaseException] = []
        # Guards pending_errors alone: reported from the delivery and compute threads,
        # taken by sync() in the caller's (a lock of its own: sync() must not wait on a
        # step holding the session lock).
        self._errors_lock = threading.Lock()
        # Train steps skipped by the non-finite guard, by job name (step_guard.py).
        self.skipped_steps: dict[str, int] = {}
        # Guarded train steps run, by job name: the call a skip warning names.
        self.guarded_calls: dict[str, int] = {}
        self._pipeline = None
        self._pipeline_depth = settings.get("pipeline_depth")

    def reseed(self, seed: int | None) -> None:
        """Restart this session's randomness from ``seed`` (``flow.random.seed``)."""
        with self.lock:
            self.rng = np.random.default_rng(seed)
            for context in self._contexts.values():
                context._rngs.clear()

    def context_for(self, backend: backends.Backend) -> ExecContext:
        context = self._contexts.get(backend.name)
        if context is None or context.backend is not backend:
            context = self._contexts[backend.name] = ExecContext(self, backend)
        return context

    @property
    def pipeline(self):
        """The step pipeline (threads start at the first call)."""
        if self._pipeline is None:
            with self.lock:
                if self._pipeline is None:
                    self._pipeline = Pipeline(self, self._pipeline_depth)
        return self._pipeline

    def set_pipeline_depth(self, depth: int) -> None:
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ValueError(f"pipeline depth: expected a positive int, got {depth!r}")
        self._pipeline_depth = depth
        if self._pipeline is not None:
            self._pipeline.admission.set_depth(depth)

    def report_error(self, exc: BaseException, where: str) -> None:
        """Keep an error of a callback-form step or a callback for the next sync()."""
        log.error("aioflow: error in %s (raised again by sync_default_session())", where,
                  exc_info=exc)
        with self._errors_lock:
            self.pending_errors.append(exc)

    # -- variables -----------------------------------------------------------------------
    def declare_variable(self, name, shape, dtype, initializer, trainable, graph,
                         is_state=False) -> VariableRecord:
        record = self.variables.get(name)
        if record is not None:
            if record.shape != shape or record.dtype is not dtype:
                raise ValueError(
                    f"variable {name!r} already exists as {record.describe()}; this "
                    f"declaration asks for {dtype.name}{list(shape)}. Variables are shared by "
                    "name across jobs: use another name for a different variable. In a test "
                    "suite, start each test from an empty session: the `flow_session` "
                    "fixture (pytest_plugins = [\"aioflow.testing\"]) or "
                    "flow.clear_default_session()")
            return record
        record = VariableRecord(name, shape, dtype, initializer, trainable, is_state)
        self.variables[name] = record
        graph.new_variables.append(name)
        return record

    def initialize(self, names=None, backend: backends.Backend | None = None) -> None:
        """(Re)initialize the named variables (default: all) from their initializers, on
        the host (so every backend starts from the same values), then place each on
        ``backend`` (default: where it lives now, or the CPU)."""
        names = list(self.variables if names is None else names)
        values = {name: _initial_value(self.variables[name], self.rng) for name in names}
        if names and is_distributed():   # every rank starts from rank 0's values
            values = broadcast_arrays(values, "broadcasting rank 0's initial variables")
        for name in names:
            record = self.variables[name]
            target = backend or record.backend or backends.named("numpy")
            record.place(values[name], target)

    def initialize_missing(self, backend: backends.Backend | None = None) -> None:
        self.initialize([n for n, r in self.variables.items() if r.value is None], backend)

    def move_variables(self, names, backend: backends.Backend) -> None:
        """Make the named variables live on ``backend`` (a job on it is about to run)."""
        for name in names:
            record = self.variables[name]
            if record.backend is not backend:
                record.move_to(backend)
                self.placement_version += 1

    def forget_variables(self, names) -> None:
        for name in names:
            self.variables.pop(name, None)

    # -- jobs ----------------------------------------------------------------------------
    def close(self, timeout: float | None = None) -> bool:
        """Drain and stop the pipeline (interpreter exit, clear_default_session), then
        the compiled jobs' data loaders."""
        drained = self._pipeline.close(timeout) if self._pipeline is not None else True
        for compiled in list(self.compiled.values()):
            compiled.close()
        return drained

    def register_job(self, job) -> None:
        if all(j is not job for j in self.jobs):
            self.jobs.append(job)

    def compile_all(self) -> None:
        """Compile every job defined so far (the checkpoint/variable APIs need them)."""
        for job in list(self.jobs):
            job.compiled_for(self)

    def sync(self) -> None:
        """Wait for pending work; re-raise the first error a step or callback reported."""
        if self._pipeline is not None:
            self._pipeline.wait_idle()
        with self._errors_lock:   # an error reported meanwhile is kept for the next sync
            errors, self.pending_errors = self.pending_errors, []
        if errors:
            first, *rest = errors
            if rest:
                first.add_note(f"({len(rest)} more errors were reported after this one)")
            raise first


def _initial_value(record: VariableRecord, rng) -> np.ndarray:
    np_dtype = dtypes.as_numpy(record.dtype)
    initializer = record.initializer
    if initializer is None:
        if record.dtype.is_floating and len(record.shape) >= 2:
            initializer = glorot_uniform_initializer()
        else:
            return np.zeros(record.shape, np_dtype)
    value = initializer(record.shape, np_dtype, rng)
    value = np.array(value, dtype=np_dtype, order="C")  # ascontiguousarray makes 0-d 1-d
    if value.shape != record.shape:
        raise ValueError(f"initializer of variable {record.name!r} produced shape "
                         f"{value.shape}, expected {record.shape}")
    return value


_default_session = Session()
_session_lock = threading.Lock()


def default_session() -> Session:
    return _default_session


@blocking_entry
def sync_default_session() -> None:
    """Wait until every pending step and callback of the default session has finished.

    Errors raised by steps of callback-form calls, or by callbacks, are raised here (the
    first one, with the original traceback). In async code: ``await
    flow.sync_default_session()``.
    """
    _default_session.sync()


@blocking_entry
def clear_default_session() -> None:
    """Sync, then drop all jobs, variables and their values: a fresh start."""
    global _default_session
    with _session_lock:
        old = _default_session
        _default_session = Session()
        try:
            old.sync()
        finally:
            old.close()


settings.on_change("pipeline_depth", lambda depth: default_session().set_pipeline_depth(depth))
seeds.on_reseed(lambda seed: default_session().reseed(seed))   # flow.random.seed(n) applies at once


def eager_execution_enabled() -> bool:
    """False: aioflow runs OneFlow's lazy mode only (job functions traced and compiled),
    so code written for both of OneFlow's modes takes its lazy path."""
    return False


@atexit.register
def _drain_at_exit() -> None:
    """Deliver in-flight steps and their callbacks before the interpreter goes."""
    session = _default_session
    if not session.close(timeout=120):
        log.error("aioflow: pending steps did not finish within 120 s at exit")
    for exc in session.pending_errors:
        log.error("aioflow: unreported error at exit", exc_info=exc)


