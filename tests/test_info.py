"""python -m aioflow info: the facts a bug report needs."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(*args, **env):
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-m", "aioflow", *args], capture_output=True,
                          text=True, env=full_env, timeout=120)


def test_info_reports_versions_blas_backends_and_data(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "mnist.npz").write_bytes(b"x" * 10)
    proc = run("info", AIOFLOW_DATA_DIR=str(tmp_path / "d"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    import numpy
    import aioflow
    assert out.startswith(f"aioflow {aioflow.__version__} ")
    assert f"Python {sys.version.split()[0]}" in out
    assert f"numpy {numpy.__version__}" in out
    assert "BLAS: " in out and " threads" in out
    assert "numpy (CPU): available" in out and "cupy (GPU): " in out
    assert f"{tmp_path / 'd'} ($AIOFLOW_DATA_DIR): mnist.npz found (10 bytes)" in out
    assert "bundled MNIST subset: " in out and "(present)" in out


def test_usage_on_anything_else():
    proc = run()
    assert proc.returncode == 2 and "usage: python -m aioflow info" in proc.stderr
