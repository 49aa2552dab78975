"""``flow.config``: process-wide settings (device counts and debug switches).

Device counts are per machine, as in OneFlow. A job runs on every device of its default
placement: the GPUs while ``gpu_device_num`` is above 0 (the default, 1), else the CPU
devices of ``cpu_device_num``; with several, each computes its part of every step
(docs/distributed.md, "Several devices in one process"; without a usable GPU the parts
run on the CPU). In a world of several ranks (``python -m aioflow.launch``) the ranks on a
host share its devices: a count must be 1 or a multiple of them, and ``machine_num`` the
hosts.

>>> import aioflow as flow
>>> flow.config.gpu_device_num(1)
>>> flow.config.cpu_device_num(1)
"""
from __future__ import annotations

from ._core import settings as _store
from ._core.settings import get as get
from ._core.no_effect import accept as _accept
from .config_knobs import collective_boxing, setters as _knob_setters
from .distributed.devices import check_device_count
from .distributed.resources import check_machine_count
from .kernels.winograd import ALGORITHMS


__all__ = [
    "gpu_device_num",
    "cpu_device_num",
    "machine_num",
    "pipeline_depth",
    "await_on_loop_ms",
    "inline_callback_ms",
    "enable_fusion",
    "launch_fusion",
    "enable_cuda_graphs",
    "enable_memory_plan",
    "kernel_threading",
    "conv_algorithm",
    "tune_malloc",
    "check_finite_inputs",
    "skip_nonfinite_steps",
    "enable_debug_mode",
    "collective_timeout",
    "get",
]


def _count(name, n):
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"flow.config.{name}: expected a non-negative int, got {n!r}")
    _store.put(name, n)


def gpu_device_num(n: int) -> None:
    """Number of GPUs per machine. While it is above 0 (the default, 1) a job's
    placeholders sit on the GPUs, as in OneFlow, and the job runs on ``n`` devices: a
    ``tp.ListNumpy`` argument holds one array per device, a consistent-view batch is split
    over them, their gradients are averaged and the variables updated once. Without a
    usable GPU the device parts run on the CPU; on one GPU they share it (read when a job
    is compiled; docs/distributed.md).

    >>> import numpy as np, aioflow as flow, aioflow.typing as tp
    >>> flow.config.gpu_device_num(2)
    >>> config = flow.function_config()
    >>> config.default_logical_view(flow.scope.mirrored_view())
    >>> @flow.global_function(type="predict", function_config=config)
    ... def double(x: tp.ListNumpy.Placeholder((2,))) -> tp.ListNumpy:
    ...     return x * 2
    >>> double([np.ones(2, np.float32), np.full(2, 3, np.float32)])   # one per device
    [array([2., 2.], dtype=float32), array([6., 6.], dtype=float32)]
    >>> flow.config.gpu_device_num(1)
    """
    _count("gpu_device_num", n)
    _check_devices("gpu_device_num", n)


def cpu_device_num(n: int) -> None:
    """Number of CPU devices per machine: how many devices a job runs on where
    ``gpu_device_num`` is 0 (see :func:`gpu_device_num`; with GPUs configured, a job's
    placeholders sit on them, as in OneFlow).

    >>> import numpy as np, aioflow as flow, aioflow.typing as tp
    >>> flow.config.gpu_device_num(0)
    >>> flow.config.cpu_device_num(2)
    >>> @flow.global_function(type="predict")
    ... def rows(x: tp.Numpy.Placeholder((4, 1))) -> tp.Numpy:
    ...     assert x.shape == (2, 1)      # each device traces its half of the batch
    ...     return x + 1                   # and the halves come back as one batch
    >>> rows(np.zeros((4, 1), np.float32)).ravel()
    array([1., 1., 1., 1.], dtype=float32)
    >>> flow.config.cpu_device_num(1); flow.config.gpu_device_num(1)
    """
    _count("cpu_device_num", n)
    _check_devices("cpu_device_num", n)


def _check_devices(name: str, n: int) -> None:
    check_device_count(name, n)


def machine_num(n: int) -> None:
    """Number of machines: must be the hosts the launcher started the ranks on (1 for a
    single process)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"flow.config.machine_num: expected a positive int, got {n!r}")
    check_machine_count(n)
    _store.put("machine_num", n)


def collective_timeout(seconds: float = 300.0) -> None:
    """How long a rank of several waits for the others in one collective (a gradient
    all-reduce, a gathered result, a checkpoint) before it reports which step it was
    waiting in and aborts every rank (default 300 s). Why a deadline: a rank that raised,
    was killed or hangs never joins, and MPI alone would wait forever.

    >>> collective_timeout(60); get("collective_timeout")
    60.0
    >>> collective_timeout()
    """
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise ValueError(f"flow.config.collective_timeout: expected a positive number of "
                         f"seconds, got {seconds!r}")
    _store.put("collective_timeout", float(seconds))






def pipeline_depth(depth: int) -> None:
    """How many steps may be admitted and unfinished at once (default 2); a caller that
    submits more waits (blocking) or suspends (await) until a step finishes. Applies to
    the running session at once and to sessions created later."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"pipeline depth: expected a positive int, got {depth!r}")
    _store.put("pipeline_depth", depth)


def await_on_loop_ms(ms: float = 5.0) -> None:
    """An awaited step that recently ran in at most ``ms`` milliseconds (default 5) runs
    on the awaiting event loop itself when no other step is in flight, instead of on the
    compute thread; a step that touches at most 64 KiB always may. 0 keeps every step off
    the loop.

    Why: handing a step to the compute thread and waking the loop afterwards costs two
    thread wake-ups, and the step shares the cores with them: queued, the seed MLP's
    awaited steps ran 1.13-1.15x the blocking ones on a 2-core VM, on the loop 1.01x. The
    loop is not held much longer than it already waits for the GIL while a step runs on
    the compute thread (up to ``sys.getswitchinterval()``, 5 ms).

    >>> await_on_loop_ms(0)     # a server that never runs a step on its loop
    >>> await_on_loop_ms(5.0)
    """
    _store.put("await_on_loop_ms", _milliseconds("await_on_loop_ms", ms))


def inline_callback_ms(ms: float = 10.0) -> None:
    """A ``-> tp.Callback`` (or unannotated, old-API) job called from plain code whose
    steps recently ran in at most ``ms`` milliseconds (default 10) runs its step in the
    calling thread, once the steps before it finished, when the caller did next to
    nothing between its last two calls (at most a tenth of a step, plus 50 us); its
    callback still runs later, on the delivery thread, in call order. 0 queues every such
    step.

    Why: with nothing to overlap, a queued step only loses: on a 2-core machine it shares
    the cores with the caller preparing the next call and with the delivery thread, and
    the seed MLP's Callback steps ran 1.10-1.12x the blocking ones queued, 1.03x in the
    calling thread. A caller that loads its next batch between calls keeps its steps
    queued, overlapping that loading; steps above ``ms`` (LeNet's) always are.

    >>> inline_callback_ms(0)   # every Callback step on the compute thread
    >>> inline_callback_ms(10.0)
    """
    _store.put("inline_callback_ms", _milliseconds("inline_callback_ms", ms))


def _milliseconds(knob: str, ms) -> float:
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not ms >= 0:
        raise ValueError(f"flow.config.{knob}: expected a number of milliseconds "
                         f">= 0, got {ms!r}")
    return float(ms)


def enable_fusion(flag: bool = True) -> None:
    """Turn the compiler's rewrites on or off for jobs compiled from now on: pooling
    before bias + relu, then a convolution and the 2x2 max pooling after it as one kernel
    that never stores the convolution's full output. Results agree to float rounding
    either way."""
    _store.put("fusion", bool(flag))


def launch_fusion(mode="auto") -> None:
    """Whether jobs compiled from now on merge ops to issue fewer kernel launches per step
    (bias + relu, the cross entropy with its gradient, one multi-tensor update per
    optimizer; docs/runtime.md). ``"auto"`` (the default): where the backend is bound by
    launches (the CuPy backend, the strict test backend and the simulated GPU), not on
    numpy; ``True`` / ``False`` force it. ``flow.config.enable_fusion(False)`` turns it off
    too. Results agree with the unfused ops to float rounding.

    >>> import aioflow as flow
    >>> flow.config.launch_fusion(True)
    >>> flow.config.launch_fusion("auto")
    """
    if mode != "auto" and not isinstance(mode, bool):
        raise ValueError(f"flow.config.launch_fusion: expected True, False or 'auto', got "
                         f"{mode!r}")
    _store.put("launch_fusion", mode)


def enable_cuda_graphs(flag: bool = True) -> None:
    """Whether train and predict steps compiled from now on for the CuPy backend replay a
    captured CUDA graph (inputs copied into fixed device buffers, one graph launch per
    step) where the plan allows it; on by default. It has no effect on the CPU. Verified
    on an H200 (docs/runtime.md); switch it off if a captured step misbehaves.

    >>> import aioflow as flow
    >>> flow.config.enable_cuda_graphs(False)
    >>> flow.config.enable_cuda_graphs(True)
    """
    if not isinstance(flag, bool):
        raise TypeError(f"flow.config.enable_cuda_graphs: expected True or False, got "
                        f"{flag!r}")
    _store.put("cuda_graphs", flag)


def enable_memory_plan(flag: bool = True) -> None:
    """Turn the compiler's memory plan on or off for jobs compiled from now on: with it,
    elementwise ops write into buffers reused by liveness and from step to step; without
    it, every op allocates its result each step. Results are identical either way."""
    _store.put("memory_plan", bool(flag))


def kernel_threading(mode: str = "auto") -> None:
    """How a compiled step uses the cores, for jobs compiled from now on.

    ``"blas"``: the BLAS library runs each matrix product on its own threads; aioflow's
    kernels run one at a time. ``"split"``: the step holds the BLAS at one thread and the
    convolution, pooling and large matrix-product kernels split their batch over worker
    threads themselves. ``"auto"`` (the default): ``"split"`` for jobs with a convolution,
    ``"blas"`` otherwise -- measured on 2 cores, the seed LeNet's train step ran about 13%
    faster split, the MLP's 1.7x slower (its small products gain nothing from splitting).
    Results agree to float rounding either way.

    >>> kernel_threading("split"); get("kernel_threading")
    'split'
    >>> kernel_threading("auto")
    """
    if mode not in ("auto", "blas", "split"):
        raise ValueError(f"flow.config.kernel_threading: mode must be 'auto', 'blas' or "
                         f"'split', got {mode!r}")
    _store.put("kernel_threading", mode)


def conv_algorithm(name: str = "auto") -> None:
    """How convolutions compute, for jobs compiled from now on.

    ``"gemm"``: as matrix products over copies of the input windows (im2col-style), the
    closest to the exact result. ``"auto"`` (the default): the forward pass and the input
    gradient of 5x5, stride-1, undilated, ungrouped convolutions with at least 16 input
    and output channels (and images small enough that Winograd's work buffers for one
    stay under 32 MiB) by Winograd's F(2x2, 5x5), with 2.8x fewer multiplications (the
    seed LeNet's conv2 forward 14 -> 9 ms on 2 cores); float32 results then differ from
    the exact ones by about 2e-6 of their largest value instead of 3e-7. GEMM elsewhere,
    and for every filter gradient. ``"winograd"``: Winograd wherever it applies, whatever
    the channel counts, the filter gradient included (its rounding is relative to the
    largest gradient, which Adam magnifies on weights with small gradients). See
    :mod:`aioflow.kernels.winograd`.

    >>> conv_algorithm("gemm"); get("conv_algorithm")
    'gemm'
    >>> conv_algorithm("auto")
    """
    if name not in ALGORITHMS:
        raise ValueError(f"flow.config.conv_algorithm: name must be one of "
                         f"{', '.join(repr(a) for a in ALGORITHMS)}, got {name!r}")
    _store.put("conv_algorithm", name)


def tune_malloc(flag: bool = True) -> None:
    """Whether compiling a job may raise glibc's ``mmap`` and trim thresholds for this
    process (default True), so the memory a step frees is reused by the next step instead
    of going back to the kernel and faulting in again: the seed LeNet's train step lost
    about 4,200 page faults and ran about 20% faster. Resident memory then stays at the
    peak of the largest step. ``False`` puts glibc's starting thresholds back if they were
    raised, and keeps jobs compiled later from raising them. Nothing happens on other C
    libraries or when the environment sets glibc's own malloc variables. See
    :mod:`aioflow.runtime.malloc`.

    >>> tune_malloc(False); get("tune_malloc")
    False
    >>> tune_malloc(True)
    """
    _store.put("tune_malloc", bool(flag))   # runtime/malloc.py restores glibc's values on False


def check_finite_inputs(flag: bool = True) -> None:
    """Whether a train job refuses float inputs holding NaN or infinity (default True).

    One such batch would make every weight it updates NaN for good; the call raises a
    ``ValueError`` naming the argument and the first bad index instead, and nothing runs.
    Checking costs one pass over each float input on the host. Predict jobs are never
    checked (a NaN there spoils only its own result). Turn it off for data that is known
    to be clean, or that uses infinity on purpose; the train step's own guard still
    skips any update whose loss or gradients come out non-finite (see ``docs/faults.md``).

    >>> import numpy as np, aioflow as flow, aioflow.typing as tp
    >>> @flow.global_function(type="train")
    ... def fit(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
    ...     w = flow.get_variable("w_finite_doc", shape=(2,), initializer=flow.ones_initializer())
    ...     loss = flow.math.reduce_sum(x * w)
    ...     flow.optimizer.SGD(0.1, momentum=0).minimize(loss)
    ...     return loss
    >>> fit(np.array([1.0, np.nan], np.float32))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: fit() argument 'x': nan at index (1,) (the first of 1 non-finite values): ...
    >>> check_finite_inputs(False)     # accepted now (and the step's guard skips it)
    >>> check_finite_inputs(True)
    """
    _store.put("check_finite_inputs", bool(flag))


def skip_nonfinite_steps(flag: bool = True) -> None:
    """Whether a train step whose loss or gradients come out NaN or infinite applies no
    update (default True; jobs compiled from now on): its variables, optimizer slots and
    step counter keep their values and a ``NonFiniteStepWarning`` names the job and step
    (``docs/faults.md``). The check reads every gradient once more per step (the seed
    MLP's 0.4 M: ~50 us on a 2-core AMD EPYC, a few percent of its CPU step); turn it off
    where that matters more than surviving a bad batch.

    >>> skip_nonfinite_steps(False)
    >>> skip_nonfinite_steps(True)
    """
    _store.put("skip_nonfinite_steps", bool(flag))


def enable_debug_mode(flag: bool = True) -> None:
    _store.put("debug", bool(flag))




# -- OneFlow's runtime knobs that have no meaning in aioflow (issue 18) ----------------------
# Accepted so OneFlow scripts run, recorded, and each warns once (at the user's line) that
# it changes nothing; none pretends to act.
__all__ += ["enable_legacy_model_io", "legacy_model_io_enabled", "enable_model_io_v2",
            "enable_tensor_float_32_compute", "save_downloaded_file_to_local_fs"]


def _no_effect(name: str, value, why: str, kind: type = bool) -> None:
    _accept(f"flow.config.{name}", value, why, kind)


def enable_legacy_model_io(val: bool = True) -> None:
    """No effect: aioflow has one checkpoint format (OneFlow's folder layout), read and
    written by ``flow.checkpoint`` whatever this says. Recorded for
    :func:`legacy_model_io_enabled`."""
    _no_effect("enable_legacy_model_io", val, "it has one checkpoint format, OneFlow's "
               "folder layout, used by flow.checkpoint and flow.train.CheckPoint alike")
    _store.put("legacy_model_io", val)


def legacy_model_io_enabled() -> bool:
    """What :func:`enable_legacy_model_io` last recorded (it changes nothing)."""
    return bool(_store.get("legacy_model_io"))


def enable_model_io_v2(val: bool = True) -> None:
    """No effect: see :func:`enable_legacy_model_io`."""
    _no_effect("enable_model_io_v2", val, "it has one checkpoint format")
    _store.put("model_io_v2", val)


def enable_tensor_float_32_compute(val: bool = True) -> None:
    """No effect: aioflow does not switch cuBLAS's TF32 mode (CuPy reads ``CUPY_TF32``
    from the environment at import)."""
    _no_effect("enable_tensor_float_32_compute", val, "set the CUPY_TF32 environment "
               "variable before importing aioflow to let CuPy use TF32")
    _store.put("tensor_float_32_compute", val)


def save_downloaded_file_to_local_fs(val: bool = True) -> None:
    """No effect: OneFlow kept a local copy of files its data readers fetched from remote
    file systems (HDFS). aioflow reads local files only; ``flow.data.load_mnist`` caches its
    download either way."""
    _no_effect("save_downloaded_file_to_local_fs", val, "its data readers read local "
               "files; flow.data.load_mnist caches its download either way")


# -- the rest of OneFlow v0.3.4's flow.config: runtime knobs without effect ----------------
# (config_knobs.py: checked as OneFlow checked them, warn once, no effect.)

globals().update(_knob_setters)
__all__ += ["collective_boxing", *_knob_setters]
