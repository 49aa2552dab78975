"""The prepared GPU run (benchmarks/gpu_check.sh) dry-run on the CPU: every stage runs on
the strict / simulated backends at small sizes and exits 0, so a typo in the script is
found here, not in the minutes a GPU is lent for."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STAGES = ["env", "gpu_tests", "matrix", "parity", "depth", "steps"]


@pytest.mark.skipif(shutil.which("timeout") is None, reason="needs coreutils' timeout")
@pytest.mark.timeout(600)
def test_the_gpu_check_dry_run_passes_every_stage(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "GPU_CHECK_PYTHON": sys.executable}
    done = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--dry-run"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=590)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = (tmp_path / "summary.txt").read_text()
    found = re.findall(r"^stage (\w+): rc=(\d+) in \d+s of \d+s", summary, re.M)
    assert [name for name, _ in found] == STAGES, summary
    failed = [name for name, rc in found if rc != "0"]
    assert not failed, summary + "".join(
        (tmp_path / f"{name}.log").read_text()[-2000:] for name in failed)
    assert "parity: all within bounds" in (tmp_path / "parity.log").read_text()
    assert re.search(r"mlp\s+100 aioflow fused\s+\d", (tmp_path / "steps.log").read_text())
