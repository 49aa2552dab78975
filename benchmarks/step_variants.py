"""``train_step.py --device cpu|gpu``: one epoch per case through the data loader, aioflow's
step variants beside PyTorch's, on the seed MLP and LeNet at batch 100 and 1000.

Cases (each trains the model with SGD from fresh variables, one epoch of ``--images``
random MNIST-shaped images through ``flow.data.Loader``, the same batches for every case):

* ``aioflow eager``: no launch fusion, no CUDA graph (``flow.config.launch_fusion(False)``,
  ``enable_cuda_graphs(False)``);
* ``aioflow fused``: the launch fusions (compiler/launch_fusion.py), no CUDA graph;
* ``aioflow graph``: fused and replayed from a captured CUDA graph (GPU only: on the CPU
  there is nothing to capture, and the row says so);
* ``torch eager`` and ``torch compile`` (``torch.compile(model, mode="reduce-overhead")``,
  where it compiles here; its first steps, which compile, are left out of the figures).

Per case: the median wall time of a step (a blocking call returning the loss on the host),
images/s over the epoch, the host CPU time per step (process CPU time over the epoch's
steps) and, on the GPU, the device time per step (CUDA events around each step's work) and
the GPU busy fraction (device time over wall time of the median step).
Launches per step of aioflow's plan are printed beside its rows.

torch is imported lazily (not an aioflow dependency).
"""
from __future__ import annotations

import statistics
import time

import numpy as np

import aioflow as flow
from aioflow import backends
from aioflow.engine.session import default_session
from aioflow.testing import simulated_gpu
from models import flow_jobs, torch_model

WARMUP_STEPS = 3
BACKENDS = {"gpu": "cupy", "cpu": "numpy", "strict": "strict"}


def device_block(device: str):
    """Jobs compiled in this block run on ``device``: ``gpu`` (CuPy), ``cpu`` (numpy),
    ``strict`` (numpy refusing what CuPy refuses) or ``simulated`` (aioflow.testing's
    simulated GPU, capturing and replaying steps as the CuPy backend's CUDA graphs do)."""
    if device == "simulated":
        return simulated_gpu(cuda_graphs=True)
    return backends.use(BACKENDS[device])


def compile_variant(build, device: str, variant: str):
    """``(build(), compiled job)``: ``build()`` returns ``(job, ...)``, its job compiled now
    for ``device`` as ``variant``: ``eager`` (no launch fusion, no CUDA graph), ``fused``
    (launch fusion) or ``graph`` (fused, replayed from a captured graph where the device
    captures: the GPU or the simulated one)."""
    flow.clear_default_session()
    flow.config.launch_fusion(variant != "eager")
    flow.config.enable_cuda_graphs(variant == "graph")
    with device_block(device):
        built = build()
        compiled = built[0].compiled_for(default_session())
    return built, compiled


def restore_defaults() -> None:
    flow.config.launch_fusion("auto")
    flow.config.enable_cuda_graphs(True)


def device_timer(compiled, skip: int = WARMUP_STEPS):
    """``device_ms()``: the median time of the compiled job's steps on the GPU after the
    first ``skip`` (CUDA events around each step's kernels, from now on), or None where the
    device is not a GPU."""
    gpu = compiled.backend.device
    if not hasattr(gpu, "elapsed_ms"):
        return None
    gpu.timings = []

    def device_ms():
        spans = [gpu.elapsed_ms(start, end) for start, end in gpu.timings[skip:]]
        return statistics.median(spans) if spans else float("nan")
    return device_ms


def graph_note(compiled) -> str:
    """How the compiled job's steps ran: replayed from a captured graph, or why not."""
    step = compiled.captured
    if step is None:
        return "not captured (no graphs on this device)"
    counts = f"captures {step.captures}, replays {step.replays}, eager steps {step.eager_steps}"
    if step.refused:
        return f"{counts}; then eagerly: {step.refused}" if step.captures else \
            f"not captured: {step.refused}"
    return counts


def aioflow_case(model, batch, device, variant):
    """``(step(x, y), launches per step, device_ms() or None)`` for a variant."""
    (train,), compiled = compile_variant(lambda: flow_jobs(model, batch=batch)[:1],
                                         "gpu" if device == "gpu" else "cpu", variant)
    return train, compiled.plan.launches_per_step, device_timer(compiled)


def torch_case(model, device, compiled: bool):
    import torch
    net = torch_model(model)
    if device == "gpu":
        net = net.cuda()
    forward = torch.compile(net, mode="reduce-overhead") if compiled else net
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    spans: list = []

    def step(x, y):
        x, y = torch.from_numpy(x), torch.from_numpy(y).long()
        if device == "gpu":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            start.record()
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(forward(x), y, reduction="none")
        loss.mean().backward()
        optimizer.step()
        if device == "gpu":
            end.record()
            spans.append((start, end))
        return loss.detach().cpu().numpy()

    def device_ms():
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) for s, e in spans[WARMUP_STEPS:]]
        return statistics.median(times) if times else float("nan")
    return step, (device_ms if device == "gpu" else None)


def run_epoch(step, images, labels, batch):
    """(median ms per step, images/s, host CPU ms per step) of one epoch through the
    loader, after ``WARMUP_STEPS`` steps on its first batch (compilation, capture)."""
    for _ in range(WARMUP_STEPS):
        step(images[:batch], labels[:batch])
    times = []
    wall, cpu = time.perf_counter(), time.process_time()
    for x, y in flow.data.Loader((images, labels), batch_size=batch, shuffle=True, seed=0):
        start = time.perf_counter()
        step(x, y)
        times.append(time.perf_counter() - start)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return (1000 * statistics.median(times), len(times) * batch / wall,
            1000 * cpu / len(times))


def main(args):
    rng = np.random.default_rng(0)
    images = rng.random((args.images, 1, 28, 28), dtype=np.float32)
    labels = rng.integers(0, 10, args.images).astype(np.int32)
    if any(case.startswith("torch") for case in args.cases):
        import torch
        if args.device == "cpu":
            torch.set_num_threads(args.threads)
        where = (torch.cuda.get_device_name() if args.device == "gpu"
                 else f"CPU, {args.threads} torch threads")
        print(f"device: {where}; torch {torch.__version__}; {args.images} images per "
              "epoch (random, MNIST's shape)")
    else:   # aioflow's cases alone need no torch (the GPU check's dry run in CI)
        print(f"device: {args.device}; {args.images} images per epoch (random)")
    print(f"{'model':6} {'batch':>5} {'case':15} {'median ms':>9} {'images/s':>9} "
          f"{'host ms':>8} {'device ms':>9} {'busy':>5} {'launches':>8}")
    for batch in args.batches:
        for model in args.models:
            for case in args.cases:
                row = _measure(case, model, batch, args.device, images, labels)
                print(f"{model:6} {batch:5} {case:15} {row}", flush=True)
    restore_defaults()


def _measure(case, model, batch, device, images, labels) -> str:
    launches, device_ms = "", None
    try:
        if case.startswith("aioflow"):
            variant = case.split()[1]
            if variant == "graph" and device != "gpu":
                return "n/a: CUDA graphs need the GPU (nothing to capture on numpy)"
            step, launches, device_ms = aioflow_case(model, batch, device, variant)
        else:
            step, device_ms = torch_case(model, device, compiled=case == "torch compile")
        median, rate, host = run_epoch(step, images, labels, batch)
    except Exception as exc:  # noqa: BLE001 - a case that cannot run here says why
        return f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    if device_ms is not None:
        on_device = device_ms()
        on_device = f"{on_device:9.2f} {100 * on_device / median:4.0f}%"
    else:
        on_device = f"{'-':>9} {'-':>5}"
    return f"{median:9.2f} {rate:9.0f} {host:8.2f} {on_device} {launches!s:>8}"


CASES = ("aioflow eager", "aioflow fused", "aioflow graph", "torch eager", "torch compile")
