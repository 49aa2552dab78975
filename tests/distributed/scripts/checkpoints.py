"""Checkpoints on 2 ranks: rank 0 writes; both load; a bad path raises on both."""
import sys

import numpy as np

import aioflow as flow
import aioflow.typing as tp

out = sys.argv[1]
rank = flow.distributed.rank()


@flow.global_function(type="train")
def train(x: tp.ListNumpy.Placeholder((2, 3))) -> tp.ListNumpy:
    loss = flow.math.square(flow.layers.dense(x, 4, name="d"))
    flow.optimizer.SGD(0.1, momentum=0).minimize(loss)
    return loss


check_point = flow.train.CheckPoint()
check_point.init()
train([np.ones((2, 3), np.float32), np.full((2, 3), 2, np.float32)])
saved = flow.get_all_variables()["d-weight"]
check_point.save(f"{out}/model")
train([np.ones((2, 3), np.float32), np.ones((2, 3), np.float32)])
check_point.load(f"{out}/model")     # every rank reads the files rank 0 wrote
assert np.array_equal(flow.get_all_variables()["d-weight"], saved)
for attempt in ("save", "load"):
    try:
        if attempt == "save":
            check_point.save(f"{out}/model")          # exists and is not empty
        else:
            check_point.load(f"{out}/missing")
    except Exception as exc:   # noqa: BLE001
        print(f"rank {rank} {attempt} refused: {type(exc).__name__}: {exc}", flush=True)
    else:
        print(f"rank {rank} {attempt} accepted", flush=True)

# Child processes of a rank (a loader's workers...) inherit the launcher's environment
# but must not initialise MPI again: each is a world of one.
import os  # noqa: E402
import subprocess  # noqa: E402

child = subprocess.run([sys.executable, "-c", "import aioflow as flow, sys; "
                        "print(flow.distributed.size(), 'mpi4py' in sys.modules)"],
                       capture_output=True, text=True, timeout=60)
print(f"rank {rank} spawned child: {child.stdout.strip()} {child.returncode}", flush=True)
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(read)
    os.write(write, str(flow.distributed.size()).encode())
    os._exit(0)
os.close(write)
os.waitpid(pid, 0)
print(f"rank {rank} forked child: world of {os.read(read, 16).decode()}", flush=True)
