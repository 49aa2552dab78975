"""``python -m aioflow.launch -n 2 script.py [args...]``: run a script on several ranks.

It runs the ``mpiexec`` installed beside this Python interpreter (``pip install
'aioflow[mpi]'`` puts MPICH's there), else the one on the PATH, with the ranks spread
over ``--hosts a,b`` or a ``--hostfile`` (MPICH's format: one ``host[:ranks]`` per
line). Each rank runs ``script.py`` with this interpreter; aioflow joins the ranks at
import. Plain ``mpiexec -n 2 python script.py`` works the same.

>>> build_command(["-n", "2", "train.py", "--epochs", "1"], mpiexec="mpiexec")[:4]
['mpiexec', '-n', '2', '...python...']
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys


def find_mpiexec() -> str:
    """The ``mpiexec`` beside this interpreter, else on the PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("mpiexec")
    if found is None:
        raise FileNotFoundError(
            "aioflow.launch: no mpiexec beside this Python or on the PATH; install one "
            "with pip install 'aioflow[mpi]' (MPICH's wheel brings mpiexec)")
    return found


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m aioflow.launch",
        description="Run an aioflow script on several ranks through mpiexec.")
    parser.add_argument("-n", "--np", dest="ranks", type=int, required=True,
                        help="how many ranks (processes) in all")
    hosts = parser.add_mutually_exclusive_group()
    hosts.add_argument("--hosts", help="comma-separated host names to spread the ranks on")
    hosts.add_argument("--hostfile", help="a file naming the hosts, one host[:ranks] a line")
    parser.add_argument("script", help="the Python script every rank runs")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    return parser


def build_command(argv, mpiexec: str | None = None) -> list[str]:
    """The ``mpiexec`` command line for ``argv`` (this module's arguments)."""
    options = _parser().parse_args(argv)
    if options.ranks < 1:
        raise SystemExit(f"aioflow.launch: -n must be at least 1, got {options.ranks}")
    command = [mpiexec or find_mpiexec(), "-n", str(options.ranks)]
    if options.hosts:
        command += ["-hosts", options.hosts]
    elif options.hostfile:
        if not os.path.isfile(options.hostfile):
            raise SystemExit(f"aioflow.launch: --hostfile {options.hostfile!r} does not exist")
        command += ["-f", options.hostfile]
    return command + [sys.executable, options.script, *options.args]


def main(argv=None) -> int:
    command = build_command(sys.argv[1:] if argv is None else argv)
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
