"""Everything CuPy: the GPU backend and its own kernels, one package (issue 23).

* :mod:`.backend` — :class:`~.backend.CupyBackend`: CuPy arrays on one CUDA device, its
  streams, events, pinned staging buffers and CUDA-graph capturer;
* :mod:`.kernels` — one-launch kernels for some primitive ops (optimizer updates, the
  sparse softmax cross entropy);
* :mod:`.fused_kernels` — kernels for the ops the compiler fuses launches into;
* :mod:`.capture_gemm` — matrix products through cuBLAS while a CUDA graph is captured.

Importing :mod:`.backend` registers the kernels (``@op.kernel_for("cupy")``) with the op
registry; nothing outside this package imports CuPy.
"""
