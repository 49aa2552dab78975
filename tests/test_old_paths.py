"""Module paths that issue 23 moved keep working, with a DeprecationWarning that names
the new path."""
import importlib
import sys

import pytest

MOVED = [("aioflow.runtime.graph_capture", "aioflow.backends.graph_capture", "CapturedStep"),
         ("aioflow.runtime.device", "aioflow.backends.device", "run_step"),
         ("aioflow.backends.cupy_backend", "aioflow.backends.cupy.backend", "CupyBackend")]


@pytest.mark.parametrize("old, new, name", MOVED)
def test_an_old_path_warns_and_gives_the_same_objects(old, new, name):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        module = importlib.import_module(old)
    assert getattr(module, name) is getattr(importlib.import_module(new), name)
