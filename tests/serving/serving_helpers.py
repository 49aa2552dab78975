"""Helpers of the serving tests: examples/serve_mnist.py imported by path, and run as a real
uvicorn process on 127.0.0.1 (``ServerProcess``)."""
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "examples", "serve_mnist.py")


def load_server_module():
    """examples/serve_mnist.py, imported once by path."""
    name = "serve_mnist_under_test"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules[name]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``python examples/serve_mnist.py ...`` on a free loopback port, its output (stdout
    and stderr) in a file that :meth:`log` reads at any time. The worktree's aioflow is
    put first on the path, whatever copy of aioflow is installed."""

    def __init__(self, checkpoint: str, log_path, *extra: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        self._log = open(log_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, SCRIPT, "--checkpoint", checkpoint, "--model", "mlp",
             "--port", str(self.port), "--batch-size", "8", "--no-access-log", *extra],
            cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        with open(self.log_path, "rb") as file:
            return file.read().decode(errors="replace")

    def wait_healthy(self, timeout: float = 40.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self.process.poll() is None, self.log()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    if s.recv(64).startswith(b"HTTP/1.1 200"):
                        return
            except OSError:
                pass
            assert time.monotonic() < deadline, f"no healthy server in {timeout} s:\n{self.log()}"
            time.sleep(0.1)

    def stop(self) -> int:
        """SIGINT (uvicorn's graceful shutdown); the exit status."""
        try:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGINT)
                try:
                    self.process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout=10)
        finally:
            self._log.close()
        return self.process.returncode
