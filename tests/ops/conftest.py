"""The op matrix checks each op's own kernel, so its jobs compile without the launch
fusions (which replace some ops by fused ones on device backends such as the strict one);
the fused ops are checked against the unfused ones in tests/compiler/test_launch_fusion.py."""
import pytest

import aioflow as flow


@pytest.fixture(autouse=True)
def unfused_launches():
    flow.config.launch_fusion(False)
    yield
    flow.config.launch_fusion("auto")
