"""The distributed pieces that need no second process: world detection, the launcher's
command, and what a world of one does with ListNumpy and the machine settings."""
import sys

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow.distributed.collectives import require_same
from aioflow.distributed.graph_ops import BUCKET_BYTES, buckets_of
from aioflow.distributed.world import OWNER_VARIABLE, detect_size
from aioflow.launch import build_command


def test_world_size_comes_from_the_launchers_environment():
    assert detect_size({}) == 1
    assert detect_size({"PMI_SIZE": "3"}) == 3
    assert detect_size({"OMPI_COMM_WORLD_SIZE": "2"}) == 2
    assert detect_size({"PMIX_RANK": "0"}) == 2
    # a child process of a rank (another pid owns MPI) is a world of one
    assert detect_size({"PMI_SIZE": "3", OWNER_VARIABLE: "1"}) == 1
    with pytest.raises(ValueError, match="PMI_SIZE should be a number"):
        detect_size({"PMI_SIZE": "two"})


def test_a_single_process_never_imports_mpi4py():
    import subprocess
    code = ("import sys, aioflow as flow; assert flow.distributed.size() == 1; "
            "print('mpi4py' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={k: v for k, v in __import__("os").environ.items()
                                           if not k.startswith(("PMI", "OMPI", "PMIX"))})
    assert done.stdout.strip() == "False", done.stderr


def test_launcher_command():
    command = build_command(["-n", "4", "--hosts", "a,b", "t.py", "--epochs", "2"],
                            mpiexec="mpiexec")
    assert command == ["mpiexec", "-n", "4", "-hosts", "a,b", sys.executable, "t.py",
                       "--epochs", "2"]
    with pytest.raises(SystemExit, match="does not exist"):
        build_command(["-n", "2", "--hostfile", "/nonexistent/hosts", "t.py"], "mpiexec")


def test_list_numpy_needs_one_array_per_device():
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def double(x: tp.ListNumpy.Placeholder((2,))) -> tp.ListNumpy:
        return x * 2

    result = double([np.ones(2, np.float32)])
    assert len(result) == 1 and result[0].tolist() == [2.0, 2.0]
    with pytest.raises(TypeError, match=r"argument 'x'.*one array per device, 1 device "
                                        r"\(flow.config.gpu_device_num\(1\)\); got "
                                        r"list of length 2"):
        double([np.ones(2, np.float32)] * 2)


def test_machines_must_match_the_world():
    flow.config.machine_num(1)
    flow.env.machine([{"addr": "127.0.0.1"}])
    with pytest.raises(ValueError, match=r"machine_num: the world of 1 rank\(s\) runs on 1 "
                                         r"machine\(s\).*got 2"):
        flow.config.machine_num(2)
    with pytest.raises(ValueError, match="flow.env.machine: .* got 2"):
        flow.env.machine([{"addr": "a"}, {"addr": "b"}])
    with pytest.raises(TypeError, match="flow.env.machine: expected a list"):
        flow.env.machine("a")
    with pytest.raises(ValueError, match="collective_timeout: expected a positive"):
        flow.config.collective_timeout(0)


def test_buckets_follow_gradient_order_and_size():
    from aioflow._core import dtypes

    class Blob:
        def __init__(self, id, shape, dtype=dtypes.float32):
            self.id, self.shape, self.dtype = id, shape, dtype

    big = BUCKET_BYTES // 4
    pairs = [("a", None, Blob(1, (big,))), ("b", None, Blob(2, (10,))),
             ("c", None, Blob(3, (10,))), ("d", None, Blob(4, (5,), dtypes.float64))]
    produced = {3: 0, 2: 1, 1: 2, 4: 3}      # c first, then b, a, d
    names = [[n for n, _, _ in bucket] for bucket in buckets_of(pairs, produced)]
    assert names == [["c", "b"], ["a"], ["d"]]


def test_differing_layouts_name_the_ranks():
    require_same([1, 1, 1], "x")
    with pytest.raises(ValueError, match=r"rank 0 has 1, rank 2 has 5 \(ranks differing "
                                         r"from rank 0: \[2\]\)"):
        require_same([1, 1, 5], "x")
