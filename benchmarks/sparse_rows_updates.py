"""The updates of ``function_config.indexed_slices_optimizer_conf`` (SGD, momentum and Adam
on a listed variable: ``sparse_rows``) on an embedding table whose batch touches a few
rows: one update (the op's kernel alone), and with ``--step`` one whole train step,
median of rounds.

    python benchmarks/sparse_rows_updates.py [--rounds 7] [--rows 512] \\
        [--tables 1000000x16,100000x64] [--rules sgd,momentum,adam] [--step]
    python benchmarks/sparse_rows_updates.py --sweep [--tables 100000x16,100000x64]

It times the aioflow of the checkout it sits in (printed first), as lazy_adam_rows.py
does (whose helpers it imports); to time an older version, copy both scripts of this
checkout into a copy of that version (``git archive <commit> | tar -x -C DIR``) and run
it there. Cases, per table of float32 ``N x D`` (a random table, ``--rows`` random row
indices, repeats possible) and rule:

* ``kernel, dense gradient``: the update given the gradient alone (a zero table but for
  the batch's rows), every version's only form before the row update;
* ``kernel, gathered indices``: given the gather's indices too, as a train job passes them
  now (only on versions whose kernel takes ``row_hints``);
* ``train step`` (``--step``): ``reduce_sum(gather(table, ids) * weights)`` trained with
  the rule, the table listed in indexed_slices_optimizer_conf, a blocking call per step.

``--sweep``: for the choice between the row path and the whole table
(``aioflow.ops.row_updates.ROW_FRACTION``), each path forced, over a growing share of the
table's rows touched (5 rounds each).
"""

import argparse
import inspect
import os
import sys
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import aioflow as flow  # noqa: E402
import aioflow.typing as tp  # noqa: E402
from aioflow.ops import state  # noqa: E402
from lazy_adam_rows import (median_ms, parse_tables, table_case,  # noqa: E402
                            warmed_steps)

LR, STEP = 0.01, 10

# rule -> (op, its slot count, its attributes, the optimizer a train job uses)
RULES = {
    "sgd": (state.sgd_update, 0, {}, lambda: flow.optimizer.SGD(LR, momentum=0)),
    "momentum": (state.momentum_update, 1, {"beta": 0.9},
                 lambda: flow.optimizer.SGD(LR, momentum=0.9)),
    "adam": (state.adam_update, 2, {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8,
                                    "do_bias_correction": False},
             lambda: flow.optimizer.Adam(LR)),
}


def takes_hints() -> bool:
    return "row_hints" in inspect.signature(state.sgd_update.forward).parameters


def update(rule: str, case, hinted: bool):
    """One call of the rule's kernel on a listed variable, as a compiled job makes it
    (numpy backend, no guard)."""
    op, slots, attrs, _ = RULES[rule]
    param, grad, m, v, ids = case
    ctx = types.SimpleNamespace(xp=np)
    inputs = [param, grad, np.asarray(LR)] + [m, v][:slots]
    if op is state.adam_update:
        inputs.append(np.asarray(STEP))
    if hinted:
        inputs.append(ids)
        attrs = {**attrs, "row_hints": 1}
    return lambda: op.forward(ctx, *inputs, sparse_rows=True, **attrs)


def train_step(rule: str, n: int, d: int, rows: int):
    """A blocking train step of an embedding job (compiled and warmed up here)."""
    flow.clear_default_session()
    config = flow.FunctionConfig()
    config.indexed_slices_optimizer_conf(dict(include_op_names=dict(op_name=["table"])))

    @flow.global_function(type="train", function_config=config)
    def fit(ids: tp.Numpy.Placeholder((rows,), dtype=flow.int32),
            weights: tp.Numpy.Placeholder((rows, d))) -> tp.Numpy:
        table = flow.get_variable("table", shape=(n, d),
                                  initializer=flow.random_normal_initializer())
        loss = flow.math.reduce_sum(flow.gather(table, ids) * weights)
        RULES[rule][3]().minimize(loss)
        return loss
    return warmed_steps(fit, n, d, rows)


def compare(tables, rules, rows: int, rounds: int, with_step: bool) -> None:
    print(f"| table (float32) | rule | rows touched | case | median ms ({rounds} rounds) |")
    print("|---|---|---|---|---|")
    for n, d in tables:
        case = table_case(n, d, rows)
        for rule in rules:
            cases = [("kernel, dense gradient", update(rule, case, False))]
            if takes_hints():
                cases.append(("kernel, gathered indices", update(rule, case, True)))
            if with_step:
                cases.append(("train step", train_step(rule, n, d, rows)))
            for name, fn in cases:
                fn()   # first-touch page faults of the temporaries, compilation
                print(f"| {n:,} x {d} | {rule} | {rows} | {name} | "
                      f"{median_ms(fn, rounds):.2f} |", flush=True)


def sweep(tables, rules) -> None:
    """Each path forced (ROW_FRACTION above 1: rows; below 0: the whole table)."""
    from aioflow.ops import row_updates
    print("| table | rule | share of rows | whole table ms | rows, indices ms | "
          "rows, searched ms |")
    print("|---|---|---|---|---|---|")
    saved = row_updates.ROW_FRACTION
    try:
        for n, d in tables:
            for share in (0.05, 0.2, 0.5):
                case = table_case(n, d, int(share * n))
                for rule in rules:
                    times = []
                    for fraction, hinted in ((-1.0, False), (2.0, True), (2.0, False)):
                        row_updates.ROW_FRACTION = fraction
                        fn = update(rule, case, hinted)
                        fn()
                        times.append(median_ms(fn, 5))
                    print(f"| {n:,} x {d} | {rule} | {share:g} | "
                          + " | ".join(f"{t:.2f}" for t in times) + " |", flush=True)
    finally:
        row_updates.ROW_FRACTION = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--tables", type=parse_tables, default=None)
    parser.add_argument("--rules", default="sgd,momentum,adam")
    parser.add_argument("--step", action="store_true", help="a train step too")
    parser.add_argument("--sweep", action="store_true")
    args = parser.parse_args()
    rules = args.rules.split(",")
    unknown = sorted(set(rules) - set(RULES))
    if unknown:
        parser.error(f"--rules: unknown {unknown}; expected some of {sorted(RULES)}")
    print(f"aioflow from {flow.__file__}")
    if args.sweep:
        sweep(args.tables or [(100_000, 16), (100_000, 64)], rules)
        return
    compare(args.tables or [(1_000_000, 16), (100_000, 64)], rules, args.rows, args.rounds,
            args.step)


if __name__ == "__main__":
    main()
