"""The GPU's code paths, run in CI on the strict test backend (aioflow/backends/strict.py).

The op matrix (forward values and gradients), the optimizers, variables, checkpoints, the
result forms, the legacy API and the seed scripts' training run again with every job
compiled for the strict backend (``AIOFLOW_DEVICE=strict``), in a subprocess so that the
override covers everything those tests compile: a kernel that reads a device value on
the host, hands a numpy array to a device operation or needs a CPU-only kernel fails
there. (The runtime and compiler tests pin CPU behaviour, such as range errors raised
inside a step and the CPU's fused kernels, and stay on numpy.)
"""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ON_STRICT = ["tests/ops", "tests/data", "tests/test_variables_and_training.py",
             "tests/test_checkpoint_api.py", "tests/test_checkpoint_io.py",
             "tests/test_examples.py", "tests/test_job_results.py",
             "tests/test_legacy_api.py", "tests/test_initializers.py",
             "tests/test_schedulers.py", "tests/test_lazy_adam_and_loss_scale.py"]


@pytest.mark.timeout(900)
def test_the_suite_passes_with_every_job_on_the_strict_backend():
    env = {**os.environ, "AIOFLOW_DEVICE": "strict"}
    result = subprocess.run(
        # The strict backend's wrapped arrays and generic kernels are slower than numpy's
        # own: each test gets 600 s there (this test's own limit covers them all).
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=short",
         "-x", "-o", "timeout=600", *ON_STRICT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " passed" in result.stdout.splitlines()[-1]
