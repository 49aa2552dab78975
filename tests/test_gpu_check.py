"""The prepared GPU run (benchmarks/gpu_check.sh) dry-run on the CPU: every stage runs on
the strict / simulated backends at small sizes and exits 0 (issue 27's zoo, await and
profile stages too, and the GPU matrix's test list is collected), so a typo in the script
is found here, not in the minutes a GPU is lent for."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STAGES = ["env", "gpu_tests", "matrix", "parity", "depth", "steps", "zoo-await", "zoo-steps",
          "zoo-profile", "zoo-b128"]


@pytest.mark.skipif(shutil.which("timeout") is None, reason="needs coreutils' timeout")
@pytest.mark.timeout(600)
def test_the_gpu_check_dry_run_passes_every_stage(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "GPU_CHECK_PYTHON": sys.executable}
    done = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--dry-run"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=590)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = (tmp_path / "summary.txt").read_text()
    found = re.findall(r"^stage ([\w-]+): rc=(\d+) in \d+s of \d+s", summary, re.M)
    assert [name for name, _ in found] == STAGES, summary
    failed = [name for name, rc in found if rc != "0"]
    assert not failed, summary + "".join(
        (tmp_path / f"{name.split('-')[0]}.log").read_text()[-2000:] for name in failed)
    assert len(list(tmp_path.iterdir())) <= 8   # what the GPU machine sends back
    assert "parity: all within bounds" in (tmp_path / "parity.log").read_text()
    assert "tests collected" in (tmp_path / "matrix.log").read_text()   # the GPU's test list
    assert re.search(r"mlp\s+100 aioflow fused\s+\d", (tmp_path / "steps.log").read_text())
    zoo = (tmp_path / "zoo.log").read_text()
    assert re.search(r"^\| mlp \| 4 \| [\d.]+ \[", zoo, re.M)            # awaited vs blocking
    for model in ("resnet50", "bert_base"):                            # eager, fused, graph
        assert re.search(rf"^\| {model} \| 2 \| aioflow fused \| [\d.]+ \|", zoo, re.M)
        assert re.search(rf"^\| {model} \| 2 \| aioflow graph \| .* replays [1-9]", zoo, re.M)
    assert re.search(r"^### resnet50 batch 2: eager step, \d+ ops", zoo, re.M)   # profile
    assert re.search(r"^\| conv2d \| \d+ \| [\d.]+ \|", zoo, re.M)
