"""The op matrix checks each op's own kernel, so its jobs compile without the launch
fusions (which replace some ops by fused ones on device backends such as the strict one);
the fused ops are checked against the unfused ones in tests/compiler/test_launch_fusion.py.
Nor are steps replayed from CUDA graphs: the matrix's kernel checks read every input and
output on the host inside the step, which a stream being captured forbids; graph replay is
checked against eager steps in tests/backends/test_gpu_fusion.py."""
import pytest

import aioflow as flow


@pytest.fixture(autouse=True)
def unfused_launches():
    flow.config.launch_fusion(False)
    flow.config.enable_cuda_graphs(False)
    yield
    flow.config.launch_fusion("auto")
    flow.config.enable_cuda_graphs(True)
