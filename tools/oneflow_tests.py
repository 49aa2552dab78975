"""Run OneFlow v0.3.4's own op tests (``oneflow/python/test/ops``) against aioflow.

Fetches nothing: point it at a checkout of Oneflow-Inc/oneflow (a work tree), or at a git
directory of it plus a tag or commit, which is read with ``git archive``::

    python tools/oneflow_tests.py --checkout ~/src/oneflow
    python tools/oneflow_tests.py --git-dir ~/src/oneflow/.git --rev v0.3.4
    python tools/oneflow_tests.py --git-dir ... --only test_watch_diff.py test_squeeze.py

Each test file runs in its own pytest process (a crash or hang stays in its file) with
``tools/oneflow_shim.py`` loaded: ``oneflow`` imports resolve to aioflow, numpy-1.x aliases
such as ``np.float`` are put back, and the tests run on the CPU. Files that import
TensorFlow form a second suite; without TensorFlow installed they are reported as skipped
(install ``tensorflow-cpu`` into the interpreter given by ``--python`` to run them).

The image, detection and COCO reader tests read COCO 2017 at ``/dataset/mscoco_2017``;
``--coco DIR`` names another copy, and where none is there the tool writes a small
synthetic stand-in (``tools/synthetic_coco.py``: COCO's file names, sizes and annotation
format, random content) and points the tests' copies at it. They also import OpenCV,
Pillow, pycocotools (and scipy for two others): install ``opencv-python-headless pillow
pycocotools scipy`` into the ``--python`` interpreter to run them.

Prints one line per file, then one summary line per suite and the plain total
``N passed, N failed`` (skipped tests are counted separately). The exit code is 0
whatever the counts: this is a measuring tool, not a gate.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TEST_DIR = "oneflow/python/test/ops"
COCO_PATH = "/dataset/mscoco_2017"   # where OneFlow's tests read COCO 2017 from
TOOLS = Path(__file__).resolve().parent
REPO = TOOLS.parent


def _parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkout", type=Path, help="a work tree of Oneflow-Inc/oneflow")
    source.add_argument("--git-dir", type=Path, help="a git directory of Oneflow-Inc/oneflow")
    parser.add_argument("--rev", default="v0.3.4", help="tag or commit with --git-dir")
    parser.add_argument("--only", nargs="*", default=None,
                        help="test file names to run (default: every test_*.py)")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter that runs the tests (needs pytest, numpy)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per file")
    parser.add_argument("--json", type=Path, help="also write every test's record here")
    parser.add_argument("--coco", type=Path, default=None,
                        help="COCO 2017 (val2017/, annotations/) for the image and detection "
                             f"tests (default: {COCO_PATH} if it exists, else a synthetic "
                             "stand-in written by tools/synthetic_coco.py)")
    return parser.parse_args(argv)


def _extract(git_dir: Path, rev: str, into: Path) -> Path:
    """The tests of ``rev`` written under ``into`` by ``git archive`` (no network)."""
    archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", rev, TEST_DIR],
                             check=True, capture_output=True).stdout
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "x", "-C", str(into)], input=archive, check=True)
    return into / TEST_DIR


def _copy_tests(test_dir: Path, into: Path) -> Path:
    """The tests copied under ``into`` (their COCO paths are rewritten in the copy)."""
    copy = into / TEST_DIR
    shutil.copytree(test_dir, copy)
    return copy


def _coco_root(args, python: str, tmp: Path) -> Path | None:
    """The COCO 2017 root the tests read: ``--coco``, the real one at OneFlow's path, or
    the synthetic stand-in (written by ``python``; None where it cannot write JPEGs)."""
    if args.coco is not None:
        return args.coco
    if Path(COCO_PATH).is_dir():
        return Path(COCO_PATH)
    made = subprocess.run([python, str(TOOLS / "synthetic_coco.py"), str(tmp / "coco")],
                          capture_output=True, text=True)
    if made.returncode != 0:
        print(f"no synthetic COCO (its writer needs numpy and Pillow or OpenCV): "
              f"{(made.stderr.strip().splitlines() or ['?'])[-1]}", file=sys.stderr)
        return None
    print(f"COCO 2017: a synthetic stand-in ({tmp / 'coco'}; tools/synthetic_coco.py)")
    return tmp / "coco"


def _point_at_coco(test_dir: Path, root: Path) -> None:
    """OneFlow's tests name ``/dataset/mscoco_2017``; they read ``root`` instead."""
    if str(root) == COCO_PATH:
        return
    for path in test_dir.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        if COCO_PATH in text:
            path.write_text(text.replace(COCO_PATH, str(root)), encoding="utf-8")


def _needs_tensorflow(path: Path) -> bool:
    text = path.read_text(encoding="utf-8", errors="replace")
    return "import tensorflow" in text


def _has_tensorflow(python: str) -> bool:
    probe = subprocess.run([python, "-c", "import tensorflow"], capture_output=True)
    return probe.returncode == 0


def _run_file(python: str, test_file: Path, timeout: int, workdir: Path) -> list[dict]:
    """Records ``{"test", "outcome", "reason"}`` of one file's tests, one per test."""
    report = workdir / (test_file.stem + ".jsonl")
    report.unlink(missing_ok=True)
    ini = workdir / "pytest.ini"
    ini.write_text("[pytest]\n")   # none of aioflow's own pytest settings apply here
    env = dict(os.environ, ONEFLOW_SHIM_REPORT=str(report), ONEFLOW_TEST_CPU_ONLY="1",
               PYTHONPATH=os.pathsep.join([str(TOOLS), str(REPO),
                                           os.environ.get("PYTHONPATH", "")]))
    command = [python, "-m", "pytest", "-q", "-p", "oneflow_shim", "-p", "no:cacheprovider",
               "-c", str(ini), "--rootdir", str(test_file.parent), str(test_file)]
    try:
        done = subprocess.run(command, cwd=test_file.parent, env=env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [{"test": test_file.name, "outcome": "failed",
                 "reason": f"timed out after {timeout} s"}]
    records = _read_records(report)
    if not records and done.returncode not in (0, 5):   # 5: no tests collected
        tail = (done.stdout + done.stderr).strip().splitlines()
        return [{"test": test_file.name, "outcome": "failed",
                 "reason": "collection: " + (tail[-1] if tail else f"rc {done.returncode}")}]
    return records


def _read_records(report: Path) -> list[dict]:
    """One record per test id; a failure in any phase outweighs a pass."""
    if not report.exists():
        return []
    by_test: dict[str, dict] = {}
    for line in report.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        kept = by_test.get(record["test"])
        if kept is None or record["outcome"] == "failed":
            by_test[record["test"]] = record
    return list(by_test.values())


def _summary(records: list[dict]) -> str:
    counts = collections.Counter(r["outcome"] for r in records)
    return (f"{counts['passed']} passed, {counts['failed']} failed"
            + (f", {counts['skipped']} skipped" if counts["skipped"] else ""))


def main(argv=None) -> int:
    args = _parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="oneflow_tests_") as tmp:
        tmp = Path(tmp)
        if args.checkout is not None:
            test_dir = args.checkout / TEST_DIR
            if not test_dir.is_dir():
                sys.exit(f"--checkout: {test_dir} is not a directory")
            test_dir = _copy_tests(test_dir, tmp / "src")
        else:
            test_dir = _extract(args.git_dir, args.rev, tmp / "src")
        coco = _coco_root(args, args.python, tmp)
        if coco is not None:
            _point_at_coco(test_dir, coco)
        files = sorted(test_dir.glob("test_*.py"))
        if args.only:
            wanted = set(args.only)
            files = [f for f in files if f.name in wanted]
        tensorflow = _has_tensorflow(args.python)
        suites: dict[str, list[dict]] = {"numpy": [], "tensorflow": []}
        work = tmp / "reports"
        work.mkdir()
        for test_file in files:
            suite = "tensorflow" if _needs_tensorflow(test_file) else "numpy"
            if suite == "tensorflow" and not tensorflow:
                records = [{"test": test_file.name, "outcome": "skipped",
                            "reason": "needs tensorflow"}]
            else:
                records = _run_file(args.python, test_file, args.timeout, work)
            for record in records:
                record["file"], record["suite"] = test_file.name, suite
            suites[suite] += records
            print(f"{test_file.name:55s} {suite:10s} {_summary(records)}", flush=True)
            for record in records:
                if record["outcome"] == "failed":
                    print(f"    FAILED {record['test'].split('::')[-1]}: {record['reason']}")
    everything = suites["numpy"] + suites["tensorflow"]
    for name, records in suites.items():
        print(f"suite {name}: {_summary(records)}")
    if args.json is not None:
        args.json.write_text(json.dumps(everything, indent=1))
    counts = collections.Counter(r["outcome"] for r in everything)
    print(f"{counts['passed']} passed, {counts['failed']} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
