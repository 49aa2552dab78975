"""The versions and the device a benchmark run used, so its figures name them
(benchmarks/gpu_check.sh's first stage). A missing package is reported, not raised."""
import importlib
import platform
import sys

print("python", platform.python_version(), sys.executable)
for name in ("numpy", "cupy", "torch", "mpi4py", "pytest", "pytest_asyncio", "anyio"):
    try:
        module = importlib.import_module(name)
        print(name, getattr(module, "__version__", "?"))
    except Exception as exc:  # noqa: BLE001 - a finding, not a failure
        print(name, "MISSING:", type(exc).__name__, exc)
try:
    import cupy
    properties = cupy.cuda.runtime.getDeviceProperties(0)
    print("cupy: CUDA runtime", cupy.cuda.runtime.runtimeGetVersion(), "driver",
          cupy.cuda.runtime.driverGetVersion(), "device", properties["name"].decode())
except Exception as exc:  # noqa: BLE001
    print("cupy device: none:", type(exc).__name__, exc)
try:
    from mpi4py import MPI
    print("MPI", MPI.Get_library_version().splitlines()[0])
except Exception as exc:  # noqa: BLE001
    print("MPI: none:", type(exc).__name__, exc)
import aioflow  # noqa: E402

print("aioflow", aioflow.__file__)
