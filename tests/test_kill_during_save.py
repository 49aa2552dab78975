"""The kill-during-save loop of benchmarks/kill_during_save.py, with a few kills."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "benchmarks"))
import kill_during_save  # noqa: E402


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
@pytest.mark.timeout(180)
def test_sigkilled_saves_leave_a_loadable_checkpoint_and_no_strays(tmp_path):
    stats = kill_during_save.run(kills=4, workdir=str(tmp_path), seed=1, timeout=120,
                                 log=lambda line: None)
    assert stats["failures"] == []
    assert stats["kills"] == stats["loads_ok"] == 4
    # a kill leaves at most the killed save's own copies; earlier ones were removed
    assert stats["max_strays_after_kill"] <= 2 and stats["strays_after_load"] == 0
