"""Every ``>>>`` example in aioflow's docstrings runs and shows what it says it shows."""
import doctest
import importlib
import pkgutil

import pytest

import aioflow as flow
from test_old_paths import MOVED   # deprecated paths: they warn when imported

_OLD_PATHS = {old for old, _, _ in MOVED}
MODULES = sorted(m.name for m in pkgutil.walk_packages(flow.__path__, "aioflow.")
                 if m.name not in _OLD_PATHS)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    flow.clear_default_session()
    try:
        result = doctest.testmod(importlib.import_module(name), report=True,
                                 optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    finally:
        flow.clear_default_session()
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"
