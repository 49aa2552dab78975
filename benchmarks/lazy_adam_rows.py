"""flow.optimizer.LazyAdam on an embedding table whose batch touches a few rows: one update
(the ``lazy_adam_update`` kernel alone) and one whole train step, median of rounds.

    python benchmarks/lazy_adam_rows.py [--rounds 7] [--rows 512] \\
        [--tables 1000000x16,100000x64] [--no-step]
    python benchmarks/lazy_adam_rows.py --sweep [--tables 100000x16]
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \\
        python benchmarks/lazy_adam_rows.py --wide-and-deep [--rounds 5]

It times the aioflow of the checkout it sits in (printed first), as zoo_models.py does; to
time an older version, copy the script into a copy of that version (``git archive <commit>
| tar -x -C DIR``) and run it there. Cases, per table of float32 ``N x D`` (a random
table, ``--rows`` random row indices, repeats possible):

* ``kernel, dense gradient``: the update given the gradient alone (a zero table but for
  the batch's rows), every version's only form before the row update;
* ``kernel, gathered indices``: given the gather's indices too, as a train job passes them
  now (only on versions whose kernel takes ``row_hints``);
* ``train step``: ``reduce_sum(gather(table, ids) * weights)`` trained with LazyAdam, a
  blocking call per step: the gradient (``gather_grad`` fills a dense table), the
  non-finite guard and the update.

``--sweep``: for the choice between the row path and the dense kernel
(``aioflow.ops.lazy_adam.ROW_FRACTION``), each kernel forced, over a growing share of the
table's rows touched.

``--wide-and-deep``: zoo_models.py's Wide&Deep at full size (batch 512, vocabularies of
200,000, embeddings of 16, seven hidden layers of 1024; LazyAdam on every variable), one
fixed batch: per round the mean of ``--steps`` blocking steps, and the time spent in its
``lazy_adam_update`` kernels (the compiled plan's kernels wrapped with a clock), the two
embedding tables apart from the other variables; medians over the rounds.
"""

import argparse
import inspect
import os
import statistics
import sys
import time
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import aioflow as flow  # noqa: E402
import aioflow.typing as tp  # noqa: E402
from aioflow.ops import lazy_adam  # noqa: E402
from aioflow.session import default_session  # noqa: E402

LR, STEP = 0.01, 10


def median_ms(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def table_case(n: int, d: int, rows: int, seed: int = 0):
    """(param, grad, m, v, ids): a batch of ``rows`` indices summed into a dense gradient."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, n, rows).astype(np.int32)
    grad = np.zeros((n, d), np.float32)
    np.add.at(grad, ids, rng.standard_normal((rows, d)).astype(np.float32))
    param = rng.standard_normal((n, d)).astype(np.float32)
    return param, grad, np.zeros_like(param), np.zeros_like(param), ids


def update(case, hinted: bool):
    """One call of the kernel, as a compiled job makes it (numpy backend, no guard)."""
    param, grad, m, v, ids = case
    ctx = types.SimpleNamespace(xp=np)
    extra, attrs = ((ids,), {"row_hints": 1}) if hinted else ((), {})
    return lambda: lazy_adam.lazy_adam_update.forward(
        ctx, param, grad, np.asarray(LR), m, v, np.asarray(STEP), *extra, beta1=0.9,
        beta2=0.999, epsilon=1e-8, **attrs)


def takes_hints() -> bool:
    return "row_hints" in inspect.signature(lazy_adam.lazy_adam_update.forward).parameters


def train_step(n: int, d: int, rows: int):
    """A blocking train step of an embedding job (compiled and warmed up here)."""
    flow.clear_default_session()

    @flow.global_function(type="train")
    def fit(ids: tp.Numpy.Placeholder((rows,), dtype=flow.int32),
            weights: tp.Numpy.Placeholder((rows, d))) -> tp.Numpy:
        table = flow.get_variable("table", shape=(n, d),
                                  initializer=flow.random_normal_initializer())
        loss = flow.math.reduce_sum(flow.gather(table, ids) * weights)
        flow.optimizer.LazyAdam(LR).minimize(loss)
        return loss
    return warmed_steps(fit, n, d, rows)


def warmed_steps(fit, n: int, d: int, rows: int):
    """``fit(ids, weights)`` on four random batches in turn, after two warm-up steps."""
    rng = np.random.default_rng(1)
    batches = [(rng.integers(0, n, rows).astype(np.int32),
                rng.standard_normal((rows, d)).astype(np.float32)) for _ in range(4)]
    for ids, weights in batches[:2]:
        fit(ids, weights)
    state = iter(range(10 ** 9))
    return lambda: fit(*batches[next(state) % len(batches)])


def compare(tables, rows: int, rounds: int, with_step: bool) -> None:
    print(f"| table (float32) | rows touched | case | median ms ({rounds} rounds) |")
    print("|---|---|---|---|")
    for n, d in tables:
        case = table_case(n, d, rows)
        cases = [("kernel, dense gradient", update(case, False))]
        if takes_hints():
            cases.append(("kernel, gathered indices", update(case, True)))
        if with_step:
            cases.append(("train step", train_step(n, d, rows)))
        for name, fn in cases:
            fn()   # first-touch page faults of the temporaries, compilation
            print(f"| {n:,} x {d} | {rows} | {name} | {median_ms(fn, rounds):.2f} |",
                  flush=True)


def sweep(tables, rounds: int) -> None:
    """Each path forced (ROW_FRACTION above 1: rows; below 0: dense) per share of rows."""
    print("| table | share of rows | dense kernel ms | rows, indices ms | rows, searched ms |")
    print("|---|---|---|---|---|")
    saved = lazy_adam.ROW_FRACTION
    try:
        for n, d in tables:
            for share in (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0):
                case = table_case(n, d, max(1, int(share * n)))
                times = []
                for fraction, hinted in ((-1.0, False), (2.0, True), (2.0, False)):
                    lazy_adam.ROW_FRACTION = fraction
                    fn = update(case, hinted)
                    fn()
                    times.append(median_ms(fn, rounds))
                print(f"| {n:,} x {d} | {share:g} | " + " | ".join(f"{t:.2f}" for t in times)
                      + " |", flush=True)
    finally:
        lazy_adam.ROW_FRACTION = saved


def wide_and_deep(rounds: int, steps: int) -> None:
    import zoo_models
    W = zoo_models.wide_and_deep_module()
    flow.clear_default_session()
    flow.random.seed(0)
    job, batch = W.train_job(), W.inputs()
    tables = {(W.WIDE_VOCAB, 1), (W.DEEP_VOCAB, W.EMBEDDING)}
    spent = {"tables": 0.0, "others": 0.0}

    def clocked(kernel):
        def run(ctx, param, *args, **attrs):
            start = time.perf_counter()
            kernel(ctx, param, *args, **attrs)
            spent["tables" if param.shape in tables else "others"] += \
                time.perf_counter() - start
        return run
    for ins in job.compiled_for(default_session()).plan.instructions:
        if ins.op_name == "lazy_adam_update":
            ins.kernel = clocked(ins.kernel)
    job(*batch)   # allocate, warm up
    rows = []
    for _ in range(rounds):
        spent.update(tables=0.0, others=0.0)
        start = time.perf_counter()
        for _ in range(steps):
            job(*batch)
        rows.append([(time.perf_counter() - start) / steps * 1e3,
                     spent["tables"] / steps * 1e3, spent["others"] / steps * 1e3])
        print("round: step {:.1f} ms, LazyAdam on the tables {:.1f} ms, on the other "
              "variables {:.1f} ms".format(*rows[-1]), flush=True)
    step, on_tables, on_others = np.median(np.array(rows), axis=0)
    print(f"Wide&Deep, median of {rounds} rounds of {steps} steps: step {step:.1f} ms, "
          f"LazyAdam on the tables {on_tables:.1f} ms, on the other variables "
          f"{on_others:.1f} ms")


def parse_tables(text: str):
    return [tuple(int(x) for x in item.split("x")) for item in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--tables", type=parse_tables, default=None)
    parser.add_argument("--no-step", action="store_true", help="the kernel cases only")
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--wide-and-deep", action="store_true")
    parser.add_argument("--steps", type=int, default=2, help="steps per Wide&Deep round")
    args = parser.parse_args()
    print(f"aioflow from {flow.__file__}")
    if args.wide_and_deep:
        wide_and_deep(args.rounds, args.steps)
    elif args.sweep:
        sweep(args.tables or [(100_000, 16)], args.rounds)
    else:
        compare(args.tables or [(1_000_000, 16), (100_000, 64)], args.rows, args.rounds,
                not args.no_step)


if __name__ == "__main__":
    main()
