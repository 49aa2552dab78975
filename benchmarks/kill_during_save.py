"""SIGKILL a trainer at random moments while it saves its checkpoint, over and over.

    python benchmarks/kill_during_save.py --kills 30 [--dir DIR] [--seed 0]

A child process builds the seed MLP with Adam (weights, Adam's two slots and the step
counter: about 4.8 MB), then saves it to the same path with ``overwrite=True`` in a loop.
The parent kills it with SIGKILL at a random moment within its save, then checks that

* the checkpoint loads (``flow.checkpoint.get``: a kill between the two renames of an
  overwrite is recovered from the ``.old`` copy), and holds every variable;
* the stray copies beside it (``.NAME.tmp-*``, ``.NAME.old-*``) never accumulate: the next
  save or load removes those of dead saves, so after a load none are left.

Prints one line per kill and a summary; exits 1 if any check failed. Bounded by
``--kills`` and ``--timeout`` seconds. tests/test_kill_during_save.py runs a few kills.
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import warnings

# The aioflow of the checkout this script is in (not another installed copy), in this
# process and in the children.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CHILD = r"""
import sys, numpy as np
import aioflow as flow, aioflow.typing as tp

@flow.global_function(type="train")
def train_job(images: tp.Numpy.Placeholder((100, 1, 28, 28), dtype=flow.float),
              labels: tp.Numpy.Placeholder((100,), dtype=flow.int32)) -> tp.Numpy:
    reshape = flow.reshape(images, [images.shape[0], -1])
    hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu, name="hidden")
    logits = flow.layers.dense(hidden, 10, name="output")
    loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
    flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([], [0.001])).minimize(loss)
    return loss

path = sys.argv[1]
flow.train.CheckPoint().init()
train_job(np.zeros((100, 1, 28, 28), np.float32), np.zeros(100, np.int32))
print("ready", flush=True)
while True:
    flow.train.CheckPoint().save(path, overwrite=True)
    print("saved", flush=True)
"""


def _strays(path: str) -> list[str]:
    parent, base = os.path.split(path)
    return sorted(e for e in os.listdir(parent)
                  if e.startswith(f".{base}.tmp-") or e.startswith(f".{base}.old-"))


def run(kills: int, workdir: str, seed: int = 0, timeout: float = 120.0,
        log=print) -> dict:
    """Kill ``kills`` saving children; returns the counts the checks need."""
    import aioflow as flow
    from aioflow.checkpoint.io import CheckpointWarning

    rng = random.Random(seed)
    path = os.path.join(workdir, "model")
    deadline = time.monotonic() + timeout
    stats = {"kills": 0, "loads_ok": 0, "recovered": 0, "max_strays_after_kill": 0,
             "strays_after_load": 0, "save_seconds": None, "failures": []}
    for attempt in range(kills):
        if time.monotonic() > deadline:
            stats["failures"].append(f"stopped after {attempt} kills: --timeout reached")
            break
        child = subprocess.Popen([sys.executable, "-c", CHILD, path], stdout=subprocess.PIPE,
                                 text=True, env={**os.environ, "PYTHONWARNINGS": "ignore",
                                      "PYTHONPATH": os.pathsep.join(
                                          [ROOT, os.environ.get("PYTHONPATH", "")])})
        try:
            assert child.stdout.readline().strip() == "ready", "child did not start"
            if stats["save_seconds"] is None:   # measure one save: kills land inside saves
                start = time.monotonic()
                assert child.stdout.readline().strip() == "saved"
                stats["save_seconds"] = time.monotonic() - start
            time.sleep(rng.uniform(0, 1.5 * stats["save_seconds"]))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
            child.stdout.close()
        stats["kills"] += 1
        strays = _strays(path)
        stats["max_strays_after_kill"] = max(stats["max_strays_after_kill"], len(strays))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                values = flow.checkpoint.get(path)
            except Exception as e:  # noqa: BLE001 - a failed check, reported below
                stats["failures"].append(f"kill {attempt}: load failed: {e!r}")
                continue
        recovered = any(issubclass(w.category, CheckpointWarning) and "restored" in str(w.message)
                        for w in caught)
        stats["recovered"] += recovered
        if len(values) != 13:  # 2 layers x (weight, bias) x (value, m, v) + the step counter
            stats["failures"].append(f"kill {attempt}: loaded {len(values)} variables, not 13")
            continue
        stats["loads_ok"] += 1
        left = _strays(path)
        stats["strays_after_load"] = max(stats["strays_after_load"], len(left))
        if left:
            stats["failures"].append(f"kill {attempt}: strays left after a load: {left}")
        log(f"kill {attempt + 1}: {len(strays)} stray copies after the kill"
            f"{' (swap interrupted: recovered from .old)' if recovered else ''}; "
            f"loads, {len(left)} strays after the load")
    return stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--dir", default=None, help="where to save (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as workdir:
        stats = run(args.kills, workdir, args.seed, args.timeout)
    print(f"{stats['kills']} kills (one save: {stats['save_seconds'] * 1000:.0f} ms): "
          f"{stats['loads_ok']} loads ok, {stats['recovered']} recovered from .old, at most "
          f"{stats['max_strays_after_kill']} stray copies after a kill, "
          f"{stats['strays_after_load']} after a load")
    for failure in stats["failures"]:
        print("FAILED:", failure)
    return 1 if stats["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
