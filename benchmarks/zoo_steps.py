"""Train steps of the v0.3 model zoo on a GPU (issue 27): ResNet-50 and the BERT-base
classifier from tests/models (benchmarks/zoo_models.py), aioflow eager / fused / graph
beside PyTorch CUDA eager and ``torch.compile(mode="reduce-overhead")`` of the same
architecture, one fixed batch, in one process.

    python benchmarks/zoo_steps.py --device gpu        # resnet50:32 bert_base:32
    python benchmarks/zoo_steps.py --device gpu --models resnet50:128 \\
        --cases 'aioflow graph' 'torch eager'
    python benchmarks/zoo_steps.py --device gpu --cases 'aioflow graph' 'torch compile'
    python benchmarks/zoo_steps.py --device strict --tiny   # the GPU check's dry run

Models are ``name:batch``: the image classifiers of benchmarks/zoo_models.py
(``resnet50``, ``resnext50``, ``alexnet``, ``vgg16_bn``, ``mobilenet_v2`` at 224x224,
``inception_v3`` at 299x299; 1000 classes, SGD with momentum), ``bert_base`` (12 layers,
hidden 768, seq 128, AdamW with global-norm clipping), and the seeds' ``mlp`` and
``lenet`` (28x28, SGD). The zoo's learning-rate schedules change the
rate every step, and a CUDA graph bakes the rate in (it would capture the step again every
step), so both optimizers run at a constant rate here; BERT's dropout is off (``--dropout``)
for the same reason: a replay would repeat the draws, so a job with dropout runs eagerly.
``--tiny``: the classifiers at the zoo tests' sizes (ResNet-50 at 32x32, channel widths
/ 8, 10 classes); BERT with 2 layers, hidden 64, seq 16, vocabulary 100 (a CPU dry run of
every code path).

Per case, after ``--warmup`` steps (compilation, capture): the median wall time of a
step (a blocking call returning the per-sample losses on the host, PyTorch's copied back
too; each step copies its batch in from host memory, pinned for PyTorch), samples/s of the
median step, host CPU ms per step (process CPU time, every thread's, over the timed
steps), device ms per step (CUDA events around each step's kernels), the GPU busy fraction
(device over wall), aioflow's launches per step and how its graph case ran (captures,
replays, or why it ran eagerly). Markdown rows, then per model the ratio of each case to
PyTorch eager. PyTorch runs with its defaults, printed in the header (TF32 for cuDNN's
convolutions, not for matmuls; ``--no-tf32``: none); its ResNet-50 takes the zoo's L2
regularization as weight decay.

torch is imported lazily; without it the torch cases print why they did not run.
"""
from __future__ import annotations

import argparse
import gc
import statistics
import time

import numpy as np

import aioflow as flow
from aioflow import backends
import zoo_models as Z
from models import flow_jobs, torch_model
from step_variants import (compile_variant, device_timer, graph_note, restore_defaults,
                           WARMUP_STEPS)

CASES = ("aioflow eager", "aioflow fused", "aioflow graph", "torch eager", "torch compile")
DEFAULT_CASES = CASES[:4]   # torch.compile takes minutes to compile a zoo model


def _bert_cfg(args):
    return Z.bert_cfg(args.dropout, **(Z.tiny_bert() if args.tiny else {}))


def inputs_of(name: str, batch: int, args) -> tuple:
    """The fixed batch every case of model ``name`` trains on (numpy arrays)."""
    if name in Z.IMAGE:
        return Z.image_batch(batch, (Z.TINY_IMAGE if args.tiny else Z.IMAGE)[name],
                             10 if args.tiny else 1000)
    if name == "bert_base":
        return Z.bert_batch(_bert_cfg(args), batch)
    rng = np.random.default_rng(0)
    return (rng.random((batch, 1, 28, 28), dtype=np.float32),
            rng.integers(0, 10, batch).astype(np.int32))


def flow_job(name: str, batch: int, args):
    """The aioflow train job of model ``name`` for batches of ``batch``."""
    if name in Z.IMAGE:
        return Z.classifier_flow_job(name, batch, args.tiny, schedule=False)[0]
    if name == "bert_base":
        return Z.bert_job(_bert_cfg(args), batch, schedule=False)[0]
    return flow_jobs(name, batch=batch)[0]


def torch_model_of(name: str, args):
    """``(net, optimizer factory, clip norm or None)``: the same model in PyTorch."""
    import torch
    if name in ("resnet50", "resnext50"):   # the zoo's l2(1/32768) regularizers as weight decay
        return (Z.classifier_torch_net(name, args.tiny),
                lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9, weight_decay=1 / 32768),
                None)
    if name == "bert_base":
        return Z.bert_torch_net(_bert_cfg(args)), Z.bert_adamw, 1.0
    if name in Z.IMAGE:
        return (Z.classifier_torch_net(name, args.tiny),
                lambda p: Z.classifier_optimizer(name, list(p)), None)
    return torch_model(name), lambda p: torch.optim.SGD(p, lr=0.01), None


def time_steps(step, steps: int, warmup: int):
    """(median ms per step, host CPU ms per step) of ``steps`` calls after ``warmup``."""
    for _ in range(warmup):
        step()
    times = []
    cpu = time.process_time()
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    cpu = time.process_time() - cpu
    return 1000 * statistics.median(times), 1000 * cpu / steps


def aioflow_row(name, batch, variant, inputs, args) -> dict:
    (job,), compiled = compile_variant(lambda: (flow_job(name, batch, args),), args.device,
                                       variant)
    device_ms = device_timer(compiled, skip=args.warmup)
    median, host = time_steps(lambda: job(*inputs), args.steps, args.warmup)
    return dict(median=median, host=host, device=device_ms() if device_ms else None,
                launches=compiled.plan.launches_per_step,
                note=graph_note(compiled) if variant == "graph" else "")


def torch_row(name, compiled: bool, inputs, args) -> dict:
    import torch
    net, make_optimizer, clip = torch_model_of(name, args)
    where = "cuda" if args.device == "gpu" else "cpu"
    net = net.to(where)
    optimizer = make_optimizer(net.parameters())
    forward = torch.compile(net, mode="reduce-overhead") if compiled else net
    host = [torch.from_numpy(a).long() if a.dtype.kind in "iu" else torch.from_numpy(a)
            for a in inputs]
    if where == "cuda":
        host = [t.pin_memory() for t in host]
    spans = []

    def step():
        *xs, labels = (t.to(where, non_blocking=True) for t in host)
        if where == "cuda":
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(forward(*xs), labels, reduction="none")
        loss.mean().backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(net.parameters(), clip)
        optimizer.step()
        if where == "cuda":
            end.record()
            spans.append((start, end))
        return loss.detach().cpu().numpy()

    median, host_ms = time_steps(step, args.steps, args.warmup)
    device_ms = None
    if spans:
        torch.cuda.synchronize()
        device_ms = statistics.median(s.elapsed_time(e) for s, e in spans[args.warmup:])
    return dict(median=median, host=host_ms, device=device_ms, launches="", note="")


def free_device_memory(device: str) -> None:
    """The finished case's cached GPU memory handed back (CuPy's pool, the CUDA graphs'
    private pool, PyTorch's)."""
    flow.clear_default_session()
    gc.collect()
    if device == "gpu":
        try:
            import cupy
            cupy.get_default_memory_pool().free_all_blocks()
            pool = getattr(backends.named("cupy").graph_capturer(), "pool", None)
            if pool is not None:
                pool.free_all_blocks()
        except Exception as exc:  # noqa: BLE001 - a finding for the log, not a failure
            print(f"(CuPy's cached memory not freed: {type(exc).__name__}: {exc})")
    try:
        import torch
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass


def measure(case, name, batch, inputs, args) -> dict | str:
    """A case's row (a dict), or why it did not run (a string)."""
    try:
        if case.startswith("aioflow"):
            return aioflow_row(name, batch, case.split()[1], inputs, args)
        return torch_row(name, case == "torch compile", inputs, args)
    except ImportError as exc:
        return f"not run: {exc}"
    except Exception as exc:  # noqa: BLE001 - a case that cannot run here says why
        return f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    finally:
        restore_defaults()
        free_device_memory(args.device)


def _cell(value, fmt) -> str:
    return "-" if value is None else format(value, fmt)


def markdown_row(name, batch, case, row) -> str:
    if isinstance(row, str):
        return f"| {name} | {batch} | {case} | {row} | | | | | | |"
    busy = None if row["device"] is None else 100 * row["device"] / row["median"]
    return (f"| {name} | {batch} | {case} | {row['median']:.2f} | "
            f"{1000 * batch / row['median']:.0f} | {row['host']:.2f} | "
            f"{_cell(row['device'], '.2f')} | {_cell(busy, '.0f')}{'%' if busy else ''} | "
            f"{row['launches']} | {row['note']} |")


def ratios_row(name, batch, rows) -> str:
    """Each case's median step over PyTorch eager's (or '-' where either is missing)."""
    base = rows.get("torch eager")
    cells = []
    for case, row in rows.items():
        if case != "torch eager" and isinstance(row, dict) and isinstance(base, dict):
            cells.append(f"{case} {row['median'] / base['median']:.2f}")
    return f"{name} batch {batch}, ratio to PyTorch eager: " + (", ".join(cells) or "-")


def parse_model(spec: str) -> tuple[str, int]:
    name, _, batch = spec.partition(":")
    if name not in (*Z.IMAGE, "bert_base", "mlp", "lenet"):
        raise argparse.ArgumentTypeError(f"unknown model {name!r}")
    return name, int(batch or 32)


def describe(args) -> str:
    """The device, and PyTorch's version and the settings that change its figures."""
    try:
        import torch
    except ImportError:
        return f"{args.device}; torch not installed"
    if args.device != "gpu":
        return f"{args.device}; torch {torch.__version__}"
    return (f"{torch.cuda.get_device_name()}; torch {torch.__version__} (TF32: cuDNN "
            f"convolutions {torch.backends.cudnn.allow_tf32}, matmul "
            f"{torch.backends.cuda.matmul.allow_tf32}; cudnn.benchmark "
            f"{torch.backends.cudnn.benchmark})")


def base_parser(doc: str, models: list) -> argparse.ArgumentParser:
    """The options of the GPU run's model scripts: --device, --models, --tiny, --dropout."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--device", choices=("gpu", "strict", "simulated", "cpu"),
                        default="gpu")
    parser.add_argument("--models", nargs="+", type=parse_model, default=models,
                        help=f"name:batch ({', '.join(Z.IMAGE)}, bert_base, mlp, lenet)")
    parser.add_argument("--tiny", action="store_true", help="the dry run's small zoo models")
    parser.add_argument("--dropout", type=float, default=0.0,
                        help="BERT's dropout (not 0: aioflow's graph case runs eagerly)")
    return parser


def arguments(argv=None):
    parser = base_parser(__doc__, [("resnet50", 32), ("bert_base", 32)])
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(DEFAULT_CASES))
    parser.add_argument("--steps", type=int, default=10, help="timed steps per case")
    parser.add_argument("--warmup", type=int, default=WARMUP_STEPS,
                        help="steps before the clock starts (compiling, capturing)")
    parser.add_argument("--no-tf32", action="store_true",
                        help="PyTorch in float32 throughout (cuDNN's TF32 off), as aioflow")
    return parser.parse_args(argv)


def main(argv=None):
    args = arguments(argv)
    if args.no_tf32:
        import torch
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    print(f"device: {describe(args)}; {args.steps} steps per case after {args.warmup}; "
          f"{'tiny models' if args.tiny else 'full size'}", flush=True)
    print("| model | batch | case | ms/step | samples/s | host ms | device ms | GPU busy "
          "| launches | graph |")
    print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
    summary, failed = [], 0
    for name, batch in args.models:
        inputs = inputs_of(name, batch, args)
        rows = {}
        for case in args.cases:
            rows[case] = measure(case, name, batch, inputs, args)
            print(markdown_row(name, batch, case, rows[case]), flush=True)
            failed += str(rows[case]).startswith("failed")
        summary.append(ratios_row(name, batch, rows))
    print("\n".join(summary), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
