"""Several processes saving and loading one checkpoint path at once (docs/faults.md,
"Several processes"): real processes, since the locks involved are per process."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from aioflow.checkpoint.io import read_arrays, save_arrays

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Saves (overwrite=True) or loads ``path`` ``rounds`` times; prints the errors as JSON. A
# save writes three variables with the same value, so a load that mixes two checkpoints
# shows as a set of more than one value.
CHILD = r"""
import json, sys, warnings
import numpy as np
sys.path.insert(0, sys.argv[4])
from aioflow.checkpoint.io import read_arrays, save_arrays
warnings.simplefilter("ignore")
role, path, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
errors = []
for i in range(rounds):
    try:
        if role == "save":
            value = np.full(20_000, i, np.float32)
            save_arrays(path, {"a": value, "b": value, "c": value}, overwrite=True)
        else:
            values = {float(v) for arr in read_arrays(path).values() for v in (arr[0], arr[-1])}
            if len(values) != 1:
                errors.append(f"a load mixed two checkpoints: {sorted(values)}")
    except Exception as e:
        errors.append(f"{type(e).__name__}: {e}")
print(json.dumps(errors))
"""


def _run_together(path, roles, rounds):
    children = [subprocess.Popen([sys.executable, "-c", CHILD, role, str(path), str(rounds),
                                  ROOT], stdout=subprocess.PIPE, text=True)
                for role in roles]
    errors = {}
    for index, (role, child) in enumerate(zip(roles, children)):
        out, _ = child.communicate(timeout=240)
        assert child.returncode == 0, out
        errors[f"{role} {index}"] = json.loads(out)
    return errors


@pytest.mark.skipif(os.name != "posix", reason="flock")
@pytest.mark.timeout(300)
def test_two_savers_and_a_loader_never_break_each_other(tmp_path):
    path = tmp_path / "model"
    zeros = np.zeros(20_000, np.float32)
    save_arrays(path, {"a": zeros, "b": zeros, "c": zeros})
    errors = _run_together(path, ["save", "save", "load", "load"], rounds=60)
    # Before the fix: a save's fresh .tmp folder deleted by the other's clean-up
    # (FileNotFoundError), loads during a swap reported "corrupt" or "missing".
    assert errors == {"save 0": [], "save 1": [], "load 2": [], "load 3": []}
    assert sorted(os.listdir(tmp_path)) == ["model"]   # no leftovers
    assert read_arrays(path)["a"][0] == 59
