"""Resume after kill -9: benchmarks/soak_train.py's parent and child, for a few seconds.

A child trains the seed MLP with Adam from async code (``await train_job``), saving with
``await SimpleCheckPointManager.save()`` every second; it is SIGKILLed inside a save and
started again. The second life must restore the newest whole checkpoint (not the
half-written one), bit for bit, at its step, replay the first life's losses (to 1e-5), and
find the killed save's leftover removed (the 30-minute version is the soak)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "benchmarks"))
import soak_train  # noqa: E402


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGKILL, /proc")
@pytest.mark.timeout(180)
def test_a_run_killed_mid_save_resumes_from_the_last_whole_checkpoint(tmp_path):
    args = soak_train.build_parser().parse_args(
        ["--save-every", "1", "--pace", "50", "--kill-at", "2.5", "--report-every", "0.5",
         "--sample-every", "0.5", "--seed", "1"])
    lines = []
    result = soak_train.run(0.15, str(tmp_path), args, log=lines.append)
    assert soak_train.check_resume(result, log=lines.append) == [], "\n".join(lines)
    first, second = result["lives"]
    start = second.of("start")[0]
    assert start["restored"] == result["whole_after_kill"][-1]
    assert 0 < start["step"] <= result["saving_step"]
    assert len(second.steps()) > 0
