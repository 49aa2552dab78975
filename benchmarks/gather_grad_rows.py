"""gather_grad's accumulation on the host: numpy's ``add.at`` on the table's rows against
one flat ``add.at`` over element indices (``aioflow.ops.indexing.add_rows``), into a table
kept from step to step (its previous rows cleared first, as a kept gradient is), median of
rounds; each case checks that the two give the same bytes.

    python benchmarks/gather_grad_rows.py [--rounds 9]

Cases (float32 ``N x D``, ``K`` random row indices, repeats possible): an embedding batch
of 512 rows on 1,000,000 x 16 and 100,000 x 64; Wide&Deep's (zoo_models.py) 13,312 rows
of its 200,000 x 16 deep table and 1,024 of its 200,000 x 1 wide one.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from aioflow.ops import indexing  # noqa: E402
from lazy_adam_rows import median_ms  # noqa: E402

CASES = [(1_000_000, 16, 512), (100_000, 64, 512), (200_000, 16, 13_312), (200_000, 1, 1_024)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    print(f"aioflow from {indexing.__file__}")
    print("| table | rows | add.at on rows ms | flat add.at ms |")
    print("|---|---|---|---|")
    rng = np.random.default_rng(0)
    for n, d, k in CASES:
        rows = rng.integers(0, n, k).astype(np.int32)
        values = rng.standard_normal((k, d)).astype(np.float32)
        before, after = np.zeros((n, d), np.float32), np.zeros((n, d), np.float32)

        def old():
            before[rows] = 0
            np.add.at(before, rows, values)

        def new():
            after[rows] = 0
            indexing.add_rows(np, after, rows, values)
        old(), new()   # first-touch page faults
        times = [median_ms(old, args.rounds), median_ms(new, args.rounds)]
        assert before.tobytes() == after.tobytes()
        print(f"| {n:,} x {d} | {k:,} | {times[0]:.3f} | {times[1]:.3f} |", flush=True)


if __name__ == "__main__":
    main()
