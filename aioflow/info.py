"""``python -m aioflow info``: what a bug report needs to know about this installation.

Prints aioflow's version, Python, numpy and the BLAS it calls with its thread count
(through threadpoolctl), the backends that can run here (CuPy and its CUDA device, or
why not), and the data folders ``flow.data.load_mnist`` searches, with what is in them.

>>> text = report()
>>> text.splitlines()[0].startswith("aioflow ")
True
>>> "numpy" in text and "backends:" in text and "data:" in text
True
"""
from __future__ import annotations

import os
import platform
import sys
from . import backends
from .data import mnist
from . import __version__

__all__ = ["report", "main"]


def _blas_lines() -> list[str]:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return ["  BLAS: unknown (threadpoolctl is not installed)"]
    import numpy  # noqa: F401 - loads the BLAS so threadpoolctl sees it
    pools = [p for p in threadpool_info() if p.get("user_api") == "blas"]
    if not pools:
        return ["  BLAS: none found loaded by numpy"]
    return [f"  BLAS: {p.get('internal_api')} {p.get('version') or ''}".rstrip()
            + f", {p.get('num_threads')} threads"
            + (f", {p['architecture']} kernels" if p.get("architecture") else "")
            + f" ({p.get('filepath')})" for p in pools]


def _backend_lines() -> list[str]:
    lines = ["  numpy (CPU): available"]
    reason = backends.gpu_unusable_reason()
    if reason is None:
        try:
            import cupy
            device = cupy.cuda.Device()
            name = cupy.cuda.runtime.getDeviceProperties(device.id)["name"]
            name = name.decode() if isinstance(name, bytes) else name
            lines.append(f"  cupy {cupy.__version__} (GPU): available, device {device.id} {name}, "
                         f"CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}")
        except Exception as exc:  # the report must not fail on an odd driver
            lines.append(f"  cupy (GPU): usable, but describing the device failed: {exc!r}")
    else:
        lines.append(f"  cupy (GPU): not usable: {reason}")
    override = os.environ.get("AIOFLOW_DEVICE")
    if override:
        lines.append(f"  $AIOFLOW_DEVICE={override}")
    return lines


def _data_lines() -> list[str]:
    lines = []
    for what, folder in mnist._search_dirs(None, None):
        if folder is None:
            lines.append(f"  ${mnist.DATA_DIR_ENV}: not set")
            continue
        path = folder / mnist.MNIST_FILENAME
        state = (f"mnist.npz found ({path.stat().st_size:,} bytes)" if path.is_file()
                 else "no mnist.npz" if folder.is_dir() else "folder does not exist")
        lines.append(f"  {os.path.abspath(folder)} ({what}): {state}")
    subset = mnist.SUBSET_PATH
    lines.append(f"  bundled MNIST subset: {subset} "
                 + ("(present)" if subset.is_file() else "(MISSING: reinstall aioflow)"))
    for name in (mnist.OFFLINE_ENV, mnist.FULL_ENV):
        if os.environ.get(name):
            lines.append(f"  ${name}={os.environ[name]}")
    return lines


def report() -> str:
    import numpy
    lines = [f"aioflow {__version__} ({os.path.dirname(os.path.abspath(__file__))})",
             f"Python {platform.python_version()} ({sys.executable}) on "
             f"{platform.platform()}, {os.cpu_count()} CPUs",
             f"numpy {numpy.__version__}"]
    lines += _blas_lines()
    lines.append("backends:")
    lines += _backend_lines()
    lines.append("data:")
    lines += _data_lines()
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv != ["info"]:
        print("usage: python -m aioflow info", file=sys.stderr)
        return 2
    print(report())
    return 0
