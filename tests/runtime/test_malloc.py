"""aioflow.runtime.malloc: compiling a job raises glibc's thresholds, so a block a step
frees is reused without page faults; never over the user's own settings or an opt-out.
Each case runs in a fresh interpreter (the thresholds are per process)."""
import json
import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc",
                                reason="the tuning applies to glibc only")

SCRIPT = r"""
import json, resource, sys
import numpy as np
import aioflow as flow
import aioflow.typing as tp
from aioflow.runtime import malloc

if sys.argv[1] == "off":
    flow.config.tune_malloc(False)

@flow.global_function(type="predict")
def double(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
    return x * 2

np.testing.assert_array_equal(double(np.ones(4, np.float32)), 2)   # compiles the job

def faults_per_round():
    # what a step's intermediates do: three 8 MiB blocks alive at once, all freed at the
    # end (24 MiB free at the top of the heap, over the 16 MiB glibc would keep)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        blocks = [np.ones(2 << 20, np.float32) for _ in range(3)]
        del blocks
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20

faults_per_round()
print(json.dumps({"applied": malloc.tune(), "faults": faults_per_round()}))
"""


def _run(mode, **env):
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                                "GLIBC_TUNABLES")}
    environment.update(env)
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], env=environment,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_compiling_a_job_raises_the_thresholds_and_freed_blocks_stop_faulting():
    tuned = _run("on")
    untuned = _run("off")
    assert tuned["applied"] is True and untuned["applied"] is False
    assert tuned["faults"] < 10                      # the block is reused as it is
    assert untuned["faults"] > 100                   # pages of 24 MiB, mapped afresh


def test_the_users_own_malloc_settings_are_left_alone():
    assert _run("on", MALLOC_TRIM_THRESHOLD_="1000000")["applied"] is False


def test_turning_it_off_restores_and_a_later_compile_raises_again():
    import aioflow as flow
    from aioflow.runtime import malloc
    flow.config.tune_malloc(False)
    assert malloc.tune() is False
    flow.config.tune_malloc(True)
    assert malloc.tune() is (not any(k in os.environ for k in malloc._USER_SETTINGS))
