"""``@flow.global_function``: a Python function becomes a compiled job.

The function is traced once per session with Blob placeholders; the graph is
differentiated (train jobs), optimized and turned into a plan at the first call (or at the
first checkpoint/variable API call). Each call then validates its numpy arguments and
submits one step; the return annotation decides how the result comes back.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def double(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
...     return x * 2
>>> double(np.array([1.0, 2.0], dtype=np.float32))
array([2., 4.], dtype=float32)
>>> print(double.graph)  # doctest: +NORMALIZE_WHITESPACE
graph double(x: float32[2]) {
  constant: float32[] = constant() value=2, shape=(), dtype=aioflow.float32
  multiply: float32[2] = multiply(x, constant)
  return multiply
}
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import time

import numpy as np

from .. import backends, distributed
from .._core import settings
from . import dynamic_inputs, dynamic_shapes
from ..distributed import checks as _checks, graph_ops as _graph_ops, views as _views  # noqa: F401
from ..distributed import devices as _devices  # noqa: F401
from . import session as session_mod
from . import step_guard  # noqa: F401 - registers the handler of skipped train steps
from ..compiler import compile as compile_graph
from ..compiler.compile import DEFAULT_OPTIONS
from . import feeds as job_feeds
from .function_config import FunctionConfig
from . import model_summary
from .inputs import convert_argument
from ..ops import tensor_buffer
from ..ir import Graph, tracing
from ..runtime.calls import await_value, call_job
from ..runtime import malloc
from ..backends.device import InFlight, submit_step
from ..backends.graph_capture import CapturedStep
from ..runtime.results import JobCall, foreign_async_library, running_loop
from .signature import (bind_arguments, flatten_result, read_parameters, read_return,
                        rebuild_result)

_JOB_TYPES = ("train", "predict")


def global_function(type=None, function_config=None):  # noqa: A002 - OneFlow's name
    """Decorator turning a function into a job: ``@flow.global_function(type="train")``.

    ``type`` is "train" or "predict"; ``function_config`` a ``flow.function_config()``.
    The old positional form ``@flow.global_function(config)`` works too. Without a
    ``type``, the job is "predict", or "train" when the config has training settings
    (``config.train.primary_lr`` / ``model_update_conf``), as in OneFlow's older API.
    """
    if isinstance(type, FunctionConfig):
        type, function_config = None, type
    if callable(type) and not isinstance(type, str):
        raise TypeError("global_function must be called: write @flow.global_function(...) "
                        "with parentheses")
    if function_config is not None and not isinstance(function_config, FunctionConfig):
        raise TypeError("global_function: function_config must come from "
                        f"flow.function_config(), got {function_config!r}")
    if type is None:
        train = function_config.train if function_config is not None else None
        configured = train is not None and (train.primary_lr() is not None
                                            or train.model_update_conf() is not None)
        type = "train" if configured else "predict"
    if type not in _JOB_TYPES:
        raise ValueError(f"global_function: type must be 'train' or 'predict', got {type!r}")

    def decorate(fn):
        return JobFunction(fn, type, function_config or FunctionConfig())

    return decorate


class JobFunction:
    """A decorated job function. Call it with numpy arrays; ``.graph`` shows its graph."""

    def __init__(self, fn, job_type: str, config: FunctionConfig):
        self.fn = fn
        self.job_type = job_type
        self.config = config
        self.parameters = read_parameters(fn)
        # A call giving every argument by position binds without building a dict.
        self._all_positional = all(p.positional for p in self.parameters)
        self.return_spec = read_return(fn)
        # mirrored placeholders: a call may give smaller arrays (dynamic_inputs.py); the
        # leaves of one device, whose arrays a call gives leaf_count of
        self.dynamic_leaves = dynamic_inputs.dynamic_leaves(self.parameters)
        self.leaf_count = dynamic_inputs.leaf_count(self.parameters)
        self.__name__ = fn.__name__
        functools.update_wrapper(self, fn)
        session_mod.default_session().register_job(self)

    def __repr__(self) -> str:
        return f"<aioflow job {self.__name__} ({self.job_type})>"

    # -- compilation -----------------------------------------------------------------------
    def devices_for(self, session) -> "distributed.devices.JobDevices":
        """The devices the job runs on in ``session``: those it was compiled for, else
        what the settings say now (``flow.config.gpu_device_num`` / ``cpu_device_num``,
        aioflow/distributed/devices.py)."""
        known = session.compiled.get(id(self))
        return known.devices if known is not None else distributed.devices.for_job()

    def compiled_for(self, session, dynamic_shapes: tuple | None = None,
                     devices=None) -> "CompiledJob":
        """The job compiled in ``session``: as declared, or (``dynamic_shapes``) the
        variant traced for those actual shapes of its dynamic arguments, compiled on its
        own (the declared shapes need not make a valid job: OneFlow checks ops on the
        actual ones). ``devices``: those of :meth:`devices_for` (read once by a call)."""
        key = id(self) if dynamic_shapes is None else (id(self), dynamic_shapes)
        compiled = session.compiled.get(key)
        if compiled is None:
            with session.lock:
                compiled = session.compiled.get(key)
                if compiled is None:
                    session.register_job(self)
                    devices = devices or self.devices_for(session)
                    try:
                        compiled = CompiledJob(self, session, dynamic_shapes, devices)
                    except (ValueError, TypeError) as exc:
                        if dynamic_shapes is None:
                            self._forget(session)
                            raise
                        raise dynamic_inputs.VariantError.wrap(
                            self.__name__, self.leaves_for(devices), dynamic_shapes,
                            exc) from exc
                    except BaseException:
                        self._forget(session)
                        raise
                    session.compiled[key] = compiled
        return compiled

    def _forget(self, session) -> None:
        # A job that fails to trace must not break checkpoint calls that compile every
        # job; it raises again at its own next call.
        session.jobs = [j for j in session.jobs if j is not self]

    @property
    def graph(self) -> Graph:
        """The compiled graph in the default session (compiles the job if needed)."""
        return self.compiled_for(session_mod.default_session()).graph

    def summary(self, print_: bool = True):
        """Each op of the compiled job with its output shape, parameters and FLOPs per
        step, then the totals and the plan's peak memory (``flow.summary(job)``)."""
        return model_summary.summary(self, print_)

    # -- calling ---------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        spec = self.return_spec
        if not (spec.callback or spec.is_legacy) and running_loop() is not None:
            # Awaited on an asyncio loop: the call makes only the awaitable. Binding,
            # checks and compiling run when it runs, at its turn on the loop (as an
            # ``async def`` body would run then): a burst of calls gathered at once costs
            # the gathering iteration ~4 us a call, not ~15, and their set-up is spread
            # over the iterations that follow (runtime/turns.py; issue 29's loop gap).
            # A bad argument raises at the await.
            session = session_mod.default_session()
            return JobCall(self._awaited(session, args, kwargs), self.__name__)
        # Arguments are copied where the call returns before its step has read them, so
        # the caller may reuse its buffers at once (an awaited call copies when it runs,
        # and only if its step is queued rather than run on the loop: runtime/calls.py).
        foreign = foreign_async_library() is not None
        returns_early = spec.callback or spec.is_legacy or foreign
        session = session_mod.default_session()
        private = False
        if returns_early:
            # On a device with a staging ring the copy goes straight into it (a job
            # compiled by an earlier call; the first call copies as the CPU does). A short
            # Callback step from plain code runs in this thread before the call returns
            # (flow.config.inline_callback_ms): copied only if it is queued after all.
            known = session.compiled.get(id(self))
            if known is None:
                private = True
            elif foreign or running_loop() is not None:
                private = known.private_copy
            else:
                known.note_caller_arrived()
                if not known.fits_inline:
                    private = known.private_copy
        compiled, arrays = self._prepared(session, args, kwargs, private)
        return call_job(self, compiled, arrays, copied=bool(private))

    def _awaited(self, session, args, kwargs):
        return await_value(lambda: self._prepared(session, args, kwargs, private=False))

    def _prepared(self, session, args, kwargs, private):
        """(the compiled job, the call's arrays): bound and checked, then compiled."""
        devices = self.devices_for(session)
        # Bind first: a refused call compiles nothing.
        arrays = self._bind(args, kwargs, private=private, devices=devices)
        # dynamic arguments of other shapes than declared: the job traced for them
        # (dynamic_inputs.py)
        shapes = (dynamic_inputs.variant_key(self.leaves_for(devices), arrays)
                  if self.dynamic_leaves else None)
        compiled = self.compiled_for(session, shapes, devices)
        if compiled.label_checks or compiled.dense_list_checks:
            compiled.check_inputs(arrays)
        return compiled, arrays

    def _bind(self, args, kwargs, private: bool = True, devices=None) -> list:
        """A call's arrays: each device's (``devices``: those of this process) one after
        another, as the placeholders of the device parts of the job's graph."""
        params = self.parameters
        name = self.__name__
        if kwargs or len(args) != len(params) or not self._all_positional:
            values = bind_arguments(params, args, kwargs, name)
            args = [values[p.name] for p in params]
        # NaN/inf in a train step's inputs would poison the weights (inputs.py).
        finite = self.job_type == "train" and settings.get("check_finite_inputs")
        if devices is None or devices.count == 1:
            arrays = []
            for p, value in zip(params, args):
                arrays += convert_argument(p.spec, value, p.name, name, private, finite,
                                           devices)[0]
            return arrays
        per_device = [[] for _ in range(devices.count)]
        for p, value in zip(params, args):
            parts = convert_argument(p.spec, value, p.name, name, private, finite, devices)
            for arrays, part in zip(per_device, parts):
                arrays += part
        return [a for arrays in per_device for a in arrays]

    def leaves_for(self, devices) -> tuple:
        """The dynamic leaves of a call's arrays on ``devices`` (each device's in turn)."""
        return dynamic_inputs.for_devices(self.dynamic_leaves, self.leaf_count,
                                          devices.count)


# An awaited step touching at most this much memory runs on the caller's loop instead of
# the compute thread: such a step takes microseconds (a 64 KiB elementwise pass ~10 us),
# less than the two thread hand-offs it saves (~40-60 us here), so it cannot stall the
# loop noticeably, and `await job(x)` of a small job costs about a blocking call.
LOOP_STEP_BYTES = 64 << 10
# Weight of the latest callback in the running average of a job's callback time
# (CompiledJob.delivers_here).
_CALLBACK_TIME_WEIGHT = 0.25
RECENT_STEPS = 9   # step_seconds: the median of this many measured steps
# private_copy: values up to this size get a plain copy, not a staging-ring buffer
SMALL_COPY_BYTES = 64 << 10
AWAY_STEPS = 20   # fits_inline: a caller gone this many steps' time runs its next step here


class CompiledJob:
    """A job traced in one session and compiled for one backend: its graph, its plan,
    and what a step needs to run the plan there.

    Built once, under the session's lock (``JobFunction.compiled_for``), then read by
    every thread a step passes through. What changes afterwards is the state a step
    updates, each field with its owner noted where it is set: the variables' placement
    (``_placement_version``) and the timing hints that choose where the next step runs
    (``_start_timing``)."""

    def __init__(self, job: JobFunction, session, dynamic_shapes: tuple | None = None,
                 devices=None):
        self.job = job
        self.session = session
        # the actual shapes of the dynamic arguments this variant was traced for (None:
        # as declared)
        self.dynamic_shapes = dynamic_shapes
        # the devices of this process the job runs on, each a part of every step
        # (aioflow/distributed/devices.py), and how the results of several come back
        self.devices = devices or distributed.devices.for_job()
        self.result_layout = None
        graph = self._new_graph()
        try:
            self._trace(graph)
            self.backend = _backend_for(graph)
            self.plan = self._compile(graph)
        except BaseException:
            session.forget_variables(graph.new_variables)
            raise
        self.graph = graph
        self._read_graph(graph)
        self.context = session.context_for(self.backend)
        # The session's placement_version when a step last checked that this job's
        # variables live on its backend: read and written under the session's lock
        # (submit_locked).
        self._placement_version = -1
        self._choose_step_paths()
        self._start_timing()
        # function_config.pipeline_depth: this job's calls are admitted only while fewer
        # steps are in flight (None: the session's depth alone).
        self.depth_limit = job.config.pipeline_depth()
        session.initialize_missing(self.backend)

    def _new_graph(self) -> Graph:
        """An empty graph for the job to be traced into."""
        job = self.job
        graph = Graph(job.__name__)
        graph.session = self.session
        graph.job_type = job.job_type
        graph.config = job.config
        graph.job_function = job   # flow.current_global_function_desc().job_func
        graph.devices = self.devices
        return graph

    def _compile(self, graph: Graph):
        """The traced graph compiled into a plan for the job's backend."""
        malloc.tune()   # a no-op after the first time, or when turned off
        plan = compile_graph(graph, _compile_options(self.job.config), self.backend)
        if distributed.is_distributed():
            distributed.checks.check_job(graph)   # the same on every rank, or an error
            plan.communicates = True
        return plan

    def _read_graph(self, graph: Graph) -> None:
        """What each call and step needs from the graph, read once."""
        # Handlers of flow.watch then flow.watch_diff, matching the outputs after the
        # job's own (runtime/results.py ``deliver_result`` hands them their values).
        self.watch_handlers = ([h for kind, _, h in graph.watches if kind == "value"]
                               + [h for kind, _, h in graph.watches if kind == "diff"])
        # flow.data readers: hidden placeholders filled by loaders at each call (runtime/calls.py)
        self.feeds = job_feeds.for_graph(graph)
        self.variable_names = tuple(graph.variable_blobs)
        self.label_checks = _label_checks(graph)
        self.dense_list_checks = _dense_list_checks(graph)

    def _choose_step_paths(self) -> None:
        """Which ways a step of this job may take besides the compute thread: the caller's
        event loop, and a captured device graph."""
        # Awaited steps may run on the caller's event loop (runtime/calls.py): only where
        # the device completes its work at once (the CPU) and no kernel fans out to the
        # worker threads; at once if the plan is tiny, else once its steps proved short.
        # A step of several ranks waits for the others: never on the caller's loop.
        self._loop_capable = (self.backend.name == "numpy" and not self.plan.split_kernels
                              and not self.plan.communicates)
        self._tiny = self.plan.bytes_touched <= LOOP_STEP_BYTES
        # flow.config.enable_cuda_graphs: a backend that can capture a step as one graph
        # replays it (backends/graph_capture.py); None: every step runs the plan eagerly.
        self.captured = None
        capturer = self.backend.graph_capturer()
        if capturer is not None and settings.get("cuda_graphs"):
            self.captured = CapturedStep(self.plan, self.context, capturer, self.job.__name__)

    def _start_timing(self) -> None:
        """The measured times that choose where the next step runs (fits_on_loop,
        fits_inline, delivers_here). Each has one writer, named below; its readers are
        callers choosing a path, without a lock: each is a hint read as one value, and a
        value one step out of date sends at most one step the slower way."""
        # The median of the last RECENT_STEPS measured steps, not a mean: one of a noisy
        # host's spikes (a 10 ms step among 3.6 ms ones) would push a mean over the
        # budgets below for several steps, and send them the slower way meanwhile.
        # Both written under the session's lock by the thread that ran a step on the
        # host (submit_locked: the compute thread, or a caller running it inline).
        self.step_seconds: float | None = None
        self._recent_steps: collections.deque = collections.deque(maxlen=RECENT_STEPS)
        # The time a plain-code caller of the Callback (or old-API) form spent on its own
        # between its last two calls (loading the next batch...): what a queued step would
        # overlap (fits_inline). From a call's return to the next call, less the time spent
        # waiting in .get() for a step. The latest gap, not an average: a loop that
        # starts or stops loading between calls is followed at once.
        # These three are the calling thread's (JobFunction.__call__, call_job and
        # LegacyResult.get note them there). One job called from plain code in several
        # threads at once mixes their gaps: still a hint, each write one value.
        self.caller_seconds: float | None = None
        self._returned_at: float | None = None
        self._waited = 0.0
        # Running average of this job's plain-code callbacks (with the watch handlers and
        # the result's conversion): short ones run in the caller's thread (delivers_here).
        # Written after each callback of the job (note_callback_time), where it ran: the
        # delivery thread or a caller's thread (deliver_here), both holding the pipeline's
        # _delivering lock, or for async code the caller's loop, without it; an update
        # lost to a loop's callback racing a plain one drops one sample of the average.
        self.callback_seconds: float | None = None

    def _trace(self, graph: Graph) -> None:
        """Trace the job function into ``graph``: once, or once for each device of this
        process (``distributed.devices.DeviceTraces``: its parts of every step)."""
        job = self.job
        # the shape each placeholder leaf is traced with: the declared one, or for a
        # variant the dynamic arguments' actual shapes (each device's in turn)
        overrides = {}
        if self.dynamic_shapes is not None:
            overrides = {index: shape for (index, _, _), shape
                         in zip(job.leaves_for(self.devices), self.dynamic_shapes)}
        leaf = iter(range(1 << 30))
        devices = self.devices
        traces = distributed.devices.DeviceTraces(graph, devices)
        per_device = []
        with tracing(graph):
            for index in range(devices.count):
                with traces.part(index):
                    args, kwargs = self._placeholders(graph, lambda: overrides.get(next(leaf)))
                    value = job.fn(*args, **kwargs)
                    blobs, template = flatten_result(job.return_spec, value, job.__name__)
                if index == 0:
                    self.template = template
                per_device.append(blobs)
            traces.finish()
            graph.outputs = list(per_device[0])
            if devices.world > 1:   # several devices' results, as one or each gives them
                graph.outputs, self.result_layout = distributed.graph_ops.gather_outputs(
                    graph, per_device, distributed.views.output_kinds(self.template))
            # Results of data-dependent length come back cut to their size (the sizes
            # are outputs after the job's own, before the watched values).
            self.dynamic_outputs = dynamic_shapes.expose_sizes(graph)
            # Watched values are outputs from here on, so no rewrite removes them.
            graph.outputs += [blob for kind, blob, _ in graph.watches if kind == "value"]
        if job.job_type != "train" and (graph.train_target is not None
                                        or graph.legacy_losses):
            what = ("optimizer.minimize()" if graph.train_target is not None
                    else "flow.losses.add_loss()")
            raise TypeError(f"job function {job.__name__!r}: {what} called in a predict "
                            "job; declare it with type='train' (or, in the old API, a "
                            "function_config with train.primary_lr)")

    def _placeholders(self, graph: Graph, next_shape) -> tuple[list, dict]:
        """The job function's arguments for one trace: placeholder Blobs."""
        args, kwargs = [], {}
        for param in self.job.parameters:
            blobs = _placeholders_for(graph, param.spec, param.name, self.job.__name__,
                                      next_shape)
            if param.positional:
                args.append(blobs)
            else:
                kwargs[param.name] = blobs
        return args, kwargs

    def check_inputs(self, arrays) -> None:
        """Checks that need the values, done here on the host before the step is
        submitted (a device would have to stall mid-step to read them)."""
        for index, classes, name in self.label_checks:
            labels = arrays[index]
            if labels.size:
                low, high = int(labels.min()), int(labels.max())
                if low < 0 or high >= classes:
                    raise ValueError(
                        f"{self.job.__name__}: argument {name!r} holds the labels of "
                        "sparse_softmax_cross_entropy_with_logits: labels must lie in "
                        f"[0, {classes}), got values from {low} to {high}")
        for index, name, op_name, shape in self.dense_list_checks:
            if arrays[index].dtype == object:   # a tensor list (inputs.py)
                raise ValueError(
                    f"{self.job.__name__}: argument {name!r} is a tensor list of "
                    f"{arrays[index].size} arrays, but the job gives it to op {op_name}, "
                    f"which needs one dense array: pass [[array of shape {shape}]]")

    def close(self) -> None:
        """Stop the job's data loaders (the session is going away)."""
        if self.feeds is not None:
            self.feeds.close()

    def private_copy(self, value):
        """A private copy of a call's argument: into the device's staging ring where it has
        one (so staging does not copy it again), else a plain numpy copy.

        A small value (at most ``SMALL_COPY_BYTES``) gets a plain copy even on a device:
        lending a ring buffer (a lock, a weak reference, often a fresh allocation) cost
        30-90 us of the caller's thread against ~2 us for the copy, and where a hundred
        awaited calls start at once that is the event loop's time (issue 29); staging then
        copies it into the ring on the compute thread, off the loop."""
        copier = getattr(self.backend.device, "private_copy", None)
        if copier is None or getattr(value, "nbytes", SMALL_COPY_BYTES + 1) <= SMALL_COPY_BYTES:
            return np.array(value, order="C", copy=True)
        return copier(value)

    @property
    def fits_on_loop(self) -> bool:
        """Whether an awaited step may run on the caller's event loop (when nothing else is
        in flight): a tiny plan, or steps that lately took at most
        ``flow.config.await_on_loop_ms``."""
        return self._short_enough(settings.get("await_on_loop_ms"))

    @property
    def fits_inline(self) -> bool:
        """Whether a Callback (or old-API) call's step from plain code runs in the calling
        thread once the steps before it finished: a tiny plan, or steps that lately took at
        most ``flow.config.inline_callback_ms`` while the caller did next to nothing
        between calls (at most a tenth of a step, plus 50 us) or was away for at least
        ``AWAY_STEPS`` steps' time: with (next to) nothing to overlap, a queued step only
        loses, to the thread hand-offs and to the caller and the delivery thread taking
        cores from it."""
        if not self._short_enough(settings.get("inline_callback_ms")):
            return False
        if self._tiny:
            return True
        gap = self.caller_seconds
        if gap is None:            # the caller's own time is not known yet
            return False
        step = self.step_seconds
        # A caller away for AWAY_STEPS steps or more (a pause, other work) is no loader
        # racing the steps: a queued step could overlap at most 1/(AWAY_STEPS + 1) of its
        # loop, and the first step after the pause would pay the compute thread's wake
        # and GIL hand-offs (a round of 40 seed-MLP steps lost 5-18 ms on it, 4-8%).
        return gap <= 0.1 * step + 50e-6 or gap >= AWAY_STEPS * step

    def build_result(self, outputs: list):
        """The user's result from a step's output arrays (after the watch handlers' turn,
        :func:`aioflow.runtime.results.deliver_result`): dynamic blobs trimmed to their
        sizes, the arrays put back into the returned structure."""
        outputs = dynamic_shapes.trim(self.dynamic_outputs, outputs)
        if self.result_layout is not None:   # several devices (distributed/views.py)
            outputs = distributed.views.device_values(self.result_layout, outputs)
        return rebuild_result(self.template, outputs)

    @property
    def delivers_here(self) -> bool:
        """Whether a callback whose step ran in the caller's thread may run there too
        (``Pipeline.deliver_here``): this job's callbacks lately took at most a tenth of a
        step plus 50 us, about what handing one to the delivery thread costs. A longer
        callback goes to the delivery thread, where it overlaps the caller's next step."""
        spent = self.callback_seconds
        return spent is None or spent <= 0.1 * (self.step_seconds or 0.0) + 50e-6

    def note_callback_time(self, seconds: float) -> None:
        average = self.callback_seconds
        self.callback_seconds = seconds if average is None else (
            average + _CALLBACK_TIME_WEIGHT * (seconds - average))

    def note_caller_arrived(self) -> None:
        """A plain-code Callback (or old-API) call begins: measure the caller's own time
        since the previous one returned."""
        returned = self._returned_at
        if returned is not None:
            self.caller_seconds = max(0.0, time.perf_counter() - returned - self._waited)
            self._returned_at = None
        self._waited = 0.0

    def note_call_returned(self) -> None:
        self._returned_at = time.perf_counter()

    def note_caller_waited(self, seconds: float) -> None:
        """The caller waited ``seconds`` for a step's result (``.get()``): not its own time."""
        self._waited += seconds

    def _short_enough(self, budget_ms: float) -> bool:
        if not (self._loop_capable and budget_ms > 0):
            return False
        return self._tiny or (self.step_seconds is not None
                              and self.step_seconds * 1000 <= budget_ms)

    def submit(self, arrays) -> InFlight:
        """Start one step through the backend's device and return without waiting for it
        (``in_flight.result()`` waits): on a device, the compute thread goes on to the
        next step while this one runs. On the CPU the step is done on return. Takes the
        session's lock: a step runs under it."""
        with self.session.lock:
            return self.submit_locked(arrays)

    def submit_locked(self, arrays) -> InFlight:
        """:meth:`submit`, for a caller holding the session's lock already."""
        session = self.session
        if self._placement_version != session.placement_version:
            session.move_variables(self.variable_names, self.backend)
            self._placement_version = session.placement_version
        start = time.perf_counter()
        step = self.captured or functools.partial(self.plan.run, self.context)
        in_flight = submit_step(self.backend.device, step, arrays)
        if in_flight.done():   # a step's time is known where the device is the host
            self._note_step_time(time.perf_counter() - start)
        return in_flight

    def run_locked(self, arrays) -> list:
        """Execute one step and wait for it in this thread, which holds the session's
        lock (``Pipeline.run_inline``: an inline blocking caller, or an awaiting loop for
        a step known to be short); returns the host outputs."""
        return self.submit_locked(arrays).result()

    def _note_step_time(self, seconds: float) -> None:
        """(The session's lock held.)"""
        recent = self._recent_steps
        recent.append(seconds)
        self.step_seconds = sorted(recent)[len(recent) // 2]


def _compile_options(function_config=None) -> dict:
    """The flow.config settings the compiler takes, as set now, with the job's own
    ``function_config`` settings that narrow them: ``enable_reused_mem(False)`` (no memory
    plan for this job) and ``enable_fuse_model_update_ops`` (its optimizer updates fused
    into one, or not, whatever the backend)."""
    options = {key: settings.get(key) for key in DEFAULT_OPTIONS}
    if function_config is not None:
        options["memory_plan"] = (options["memory_plan"]
                                  and function_config.setting("enable_reused_mem"))
        options["fuse_model_update"] = function_config.setting("enable_fuse_model_update_ops")
    return options


def _backend_for(graph: Graph):
    """The backend the devices of the traced graph's ops ask for, checked against the
    graph's host-side values (a reader's)."""
    backend = backends.for_job({n.device for n in graph.nodes} or {"default"})
    tensor_buffer.check_backend(graph, backend)   # a reader's host values
    return backend


def _label_checks(graph: Graph) -> list[tuple[int, int, str]]:
    """(input index, classes, placeholder name) of each sparse cross entropy fed labels
    straight from a placeholder."""
    # A reader's blobs come after the parameters and are not in a call's arguments.
    fed = job_feeds.fed_blob_ids(graph)
    index_of = {blob.id: i for i, blob in enumerate(graph.placeholders) if blob.id not in fed}
    checks = []
    for node in graph.nodes:
        if node.op.name == "sparse_softmax_cross_entropy":
            labels, logits = node.inputs
            if labels.id in index_of:
                checks.append((index_of[labels.id], logits.shape[-1],
                               graph.placeholder_names[labels.id]))
    return checks


def _dense_list_checks(graph: Graph) -> list[tuple[int, str, str, tuple]]:
    """(input index, name, op, static shape) of each tp.ListListNumpy placeholder that an
    op needing a dense tensor reads: a call passing a tensor list there is refused."""
    fed = job_feeds.fed_blob_ids(graph)
    index_of = {blob.id: i for i, blob in enumerate(graph.placeholders) if blob.id not in fed}
    checks = {}
    for node in graph.nodes:
        if node.op.host_values:
            continue
        for blob in node.inputs:
            if blob.id in graph.tensor_list_inputs and blob.id not in checks:
                checks[blob.id] = (index_of[blob.id], graph.placeholder_names[blob.id],
                                   node.op.name, blob.shape)
    return list(checks.values())


def _placeholders_for(graph, spec, name, job_name, next_shape):
    """The placeholder Blob(s) of a parameter; ``next_shape()`` gives, leaf by leaf, the
    shape to trace a dynamic leaf with (None: the declared one)."""
    if isinstance(spec, tuple):
        return tuple(_placeholders_for(graph, s, f"{name}_{i}", job_name, next_shape)
                     for i, s in enumerate(spec))
    shape = next_shape()
    traced = spec if shape is None else dataclasses.replace(spec, shape=shape)
    blob = distributed.views.add_placeholder(graph, traced, name, job_name, graph.devices)
    graph.batch_axes[blob.id] = (None if spec.batch_axis is None
                                 else spec.batch_axis % max(len(spec.shape), 1))
    if dynamic_inputs.is_dynamic_spec(spec):
        graph.dynamic_inputs.add(blob.id)
    if spec.kind == "list_list_numpy":   # may be given a tensor list (inputs.py)
        graph.tensor_list_inputs.add(blob.id)
    return blob
