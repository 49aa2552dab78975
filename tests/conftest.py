"""Suite-wide settings.

Jobs compile for the CPU unless the run asks otherwise: on a machine with a GPU, jobs
outside any placement block would otherwise follow OneFlow's default and run there, and
most of the suite pins CPU behaviour (fused CPU kernels, thread splits, in-step range
errors). ``AIOFLOW_DEVICE=gpu python -m pytest tests/ops`` runs the op matrix on the GPU;
the GPU tests (``tests/backends``) choose their backend themselves.

This file also puts ``tests/`` on ``sys.path`` (pytest's rootdir-less conftest import), so
test modules import shared helpers such as ``tolerances`` by name.
"""
import os

os.environ.setdefault("AIOFLOW_DEVICE", "cpu")
