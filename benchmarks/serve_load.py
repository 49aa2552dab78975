"""Load test of examples/serve_mnist.py: N concurrent clients for T seconds, batching on/off.

    python examples/quickstart.py                      # saves ./quickstart_model (LeNet)
    python benchmarks/serve_load.py --checkpoint ./quickstart_model --clients 64 --duration 10

For each mode it starts the server (``serve_mnist.py``, uvicorn on 127.0.0.1, a free port,
no access log) as a subprocess, waits for ``/healthz``, sends a short warm-up, then runs
``--clients`` closed-loop clients for ``--duration`` seconds: each sends one
``POST /v1/models/mnist:predict`` with one 28x28 digit (real images from the bundled set),
waits for the answer, and sends the next. It prints throughput, latency percentiles, the
errors, and the server's mean batch size; then stops the server (SIGINT: graceful).

Modes, all with the same HTTP stack: ``batched`` (DynamicBatcher over a job of
``--batch-size`` images); ``padded`` (``--no-batching --pad``: every request is one step of
that same job, its other rows zero padding: what a server that calls the job once per
request does); ``unbatched`` (``--no-batching``: every request is one step of a separately
compiled batch-1 job: the strongest one-request-per-step baseline). Two steps in flight in
both baselines.

``--in-process`` measures the same two modes without HTTP: the clients are tasks awaiting
the server's model object (built by ``serve_mnist.load_model``) directly, which shows what
the batcher and the runtime sustain and how much of the HTTP figures is the HTTP stack.

Bounded: loopback only (``--url`` must name 127.0.0.1, ::1 or localhost), at most
``--duration`` seconds and ``--max-requests`` requests per mode, 30 s per request, 60 s
for a server to start. The clients are a minimal HTTP/1.1 keep-alive client on asyncio
streams, so the load generator costs the shared CPU as little as possible.
"""
import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse

import numpy as np

import aioflow as flow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER = os.path.join(ROOT, "examples", "serve_mnist.py")
PATH = "/v1/models/mnist:predict"
LOOPBACK = ("127.0.0.1", "::1", "localhost")
REQUEST_TIMEOUT = 30.0
START_TIMEOUT = 60.0
MODES = ("batched", "padded", "unbatched")


class Connection:
    """One keep-alive HTTP/1.1 connection: POST a body, read status and body."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader = self.writer = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        head = (f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
        self.writer.write(head.encode() + body)
        status_line, _, headers = (await self.reader.readuntil(b"\r\n\r\n")).partition(b"\r\n")
        status = int(status_line.split()[1])
        length, close = 0, False
        for line in headers.split(b"\r\n"):
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection" and value.strip().lower() == b"close":
                close = True
        payload = await self.reader.readexactly(length)
        if close:
            await self.close()
        return status, payload

    async def get(self, path: str) -> tuple[int, bytes]:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            data = await reader.read()
        finally:
            writer.close()
        head, _, body = data.partition(b"\r\n\r\n")
        return int(head.split()[1]), body

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except OSError:
                pass
        self.reader = self.writer = None


def request_bodies(count: int = 64) -> list[bytes]:
    """One-instance predict bodies with real digits (the bundled set's test images)."""
    _, (images, _) = flow.data.load_digits(100, 100)
    flat = images.reshape(-1, 784)[:count]
    return [json.dumps({"instances": [[round(float(v), 4) for v in image]]}).encode()
            for image in flat]


async def run_load(host, port, clients, duration, max_requests, bodies) -> dict:
    """``clients`` closed-loop clients for ``duration`` s (or ``max_requests`` in all)."""
    latencies: list[float] = []
    errors: dict[str, int] = {}
    sent = 0
    deadline = time.perf_counter() + duration

    async def client(index: int) -> None:
        nonlocal sent
        connection = Connection(host, port)
        i = index
        try:
            while time.perf_counter() < deadline and sent < max_requests:
                sent += 1
                body = bodies[i % len(bodies)]
                i += clients
                start = time.perf_counter()
                try:
                    status, _ = await asyncio.wait_for(connection.post(PATH, body),
                                                       REQUEST_TIMEOUT)
                except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
                    errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                    await connection.close()
                    continue
                if status == 200:
                    latencies.append(time.perf_counter() - start)
                else:
                    errors[f"HTTP {status}"] = errors.get(f"HTTP {status}", 0) + 1
        finally:
            await connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    elapsed = time.perf_counter() - started
    ms = np.array(latencies) * 1000
    return {"clients": clients, "seconds": elapsed, "ok": len(latencies), "errors": errors,
            "throughput": len(latencies) / elapsed,
            "p50_ms": float(np.percentile(ms, 50)) if ms.size else float("nan"),
            "p90_ms": float(np.percentile(ms, 90)) if ms.size else float("nan"),
            "p99_ms": float(np.percentile(ms, 99)) if ms.size else float("nan")}


def _load_server_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("serve_mnist", SERVER)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def run_in_process(mode: str, args) -> dict:
    """The same load without HTTP: ``clients`` tasks awaiting the model object."""
    serve_mnist = _load_server_module()
    await flow.clear_default_session()  # in a running loop: an awaitable (the async rule)
    config = serve_mnist.ServerConfig(
        checkpoint=args.checkpoint, model=args.model, batching=mode == "batched",
        pad=mode == "padded",
        batch_size=args.batch_size, max_wait=args.max_wait_ms / 1000, max_queue=4096,
        max_inflight_batches=args.max_inflight_batches)
    model = await serve_mnist.load_model(config)
    _, (images, _) = flow.data.load_digits(100, 100)
    samples = list(images.reshape(-1, 1, 28, 28)[:64])
    latencies, sent = [], 0

    async def client(index: int, deadline: float, limit: int, record: bool) -> None:
        nonlocal sent
        i = index
        while time.perf_counter() < deadline and sent < limit:
            sent += 1
            start = time.perf_counter()
            await asyncio.wait_for(model(samples[i % len(samples)]), REQUEST_TIMEOUT)
            if record:
                latencies.append(time.perf_counter() - start)
            i += args.clients

    try:
        warm = time.perf_counter() + 1.0
        await asyncio.gather(*(client(i, warm, 10_000, False) for i in range(8)))
        before = model.metrics()
        sent = 0
        started = time.perf_counter()
        deadline = started + args.duration
        await asyncio.gather(*(client(i, deadline, args.max_requests, True)
                               for i in range(args.clients)))
        elapsed = time.perf_counter() - started
        after = model.metrics()
    finally:
        await model.close()
    ms = np.array(latencies) * 1000
    steps = after["batches"] - before["batches"]
    return {"clients": args.clients, "seconds": elapsed, "ok": len(latencies), "errors": {},
            "throughput": len(latencies) / elapsed,
            "p50_ms": float(np.percentile(ms, 50)), "p90_ms": float(np.percentile(ms, 90)),
            "p99_ms": float(np.percentile(ms, 99)), "steps": steps,
            "mean_batch": (after["batch_rows"] - before["batch_rows"]) / steps}


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return float("nan")


async def measure(host, port, args, bodies) -> dict:
    probe = Connection(host, port)
    await run_load(host, port, min(args.clients, 8), 1.0, 10_000, bodies)  # warm-up
    _, before = await probe.get("/metrics")
    result = await run_load(host, port, args.clients, args.duration, args.max_requests, bodies)
    _, after = await probe.get("/metrics")
    steps = (_metric(after.decode(), "aioflow_serving_batches_total")
             - _metric(before.decode(), "aioflow_serving_batches_total"))
    rows = (_metric(after.decode(), "aioflow_serving_batch_rows_total")
            - _metric(before.decode(), "aioflow_serving_batch_rows_total"))
    result["steps"] = int(steps)
    result["mean_batch"] = rows / steps if steps else float("nan")
    return result


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _wait_healthy(process, port) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with code {process.returncode}")
        try:
            status, _ = await Connection("127.0.0.1", port).get("/healthz")
            if status == 200:
                return
        except OSError:
            pass
        await asyncio.sleep(0.2)
    raise RuntimeError(f"the server did not become healthy within {START_TIMEOUT} s")


async def run_mode(mode: str, args, bodies) -> dict:
    port = _free_port()
    command = [sys.executable, SERVER, "--checkpoint", args.checkpoint, "--model", args.model,
               "--port", str(port), "--batch-size", str(args.batch_size),
               "--max-wait-ms", str(args.max_wait_ms), "--max-queue", "4096",
               "--max-inflight-batches", str(args.max_inflight_batches),
               "--no-access-log", "--log-level", "warning"]
    if mode in ("unbatched", "padded"):
        command.append("--no-batching")
    if mode == "padded":
        command.append("--pad")
    process = subprocess.Popen(command, cwd=ROOT)
    try:
        await _wait_healthy(process, port)
        return await measure("127.0.0.1", port, args, bodies)
    finally:
        await stop_server(process)


async def stop_server(process: subprocess.Popen) -> None:
    """SIGINT (a graceful drain), SIGKILL after 30 s."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            await asyncio.to_thread(process.wait, 30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _print(mode: str, r: dict) -> None:
    errors = ", ".join(f"{k}: {v}" for k, v in r["errors"].items()) or "none"
    print(f"{mode:>10}: {r['throughput']:8.1f} req/s  p50 {r['p50_ms']:7.1f} ms  "
          f"p90 {r['p90_ms']:7.1f} ms  p99 {r['p99_ms']:7.1f} ms  ({r['ok']} ok in "
          f"{r['seconds']:.1f} s, {r['steps']} steps, mean batch {r['mean_batch']:.1f}; "
          f"errors: {errors})", flush=True)


async def main_async(args) -> dict:
    bodies = None if args.in_process else request_bodies()
    results = {}
    if args.url:
        url = urllib.parse.urlsplit(args.url)
        if url.hostname not in LOOPBACK:
            raise SystemExit(f"--url must be a loopback address ({', '.join(LOOPBACK)}), "
                             f"got {url.hostname!r}")
        results["server"] = await measure(url.hostname, url.port or 80, args, bodies)
        _print("server", results["server"])
        return results
    for mode in args.modes.split(","):
        if mode not in MODES:
            raise SystemExit(f"unknown mode {mode!r}: use {', '.join(MODES)}")
        if args.in_process:
            results[mode] = await run_in_process(mode, args)
        else:
            results[mode] = await run_mode(mode, args, bodies)
        _print(mode, results[mode])
    for baseline in ("padded", "unbatched"):
        if "batched" in results and baseline in results:
            b, u = results["batched"], results[baseline]
            print(f"batching vs {baseline}: {b['throughput'] / u['throughput']:.1f}x the "
                  f"throughput, p99 {b['p99_ms']:.1f} ms vs {u['p99_ms']:.1f} ms")
    return results


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default="./quickstart_model")
    parser.add_argument("--model", choices=("lenet", "mlp"), default="lenet")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per mode")
    parser.add_argument("--max-requests", type=int, default=1_000_000,
                        help="stop a mode after this many requests even if time is left")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-wait-ms", type=float, default=5.0)
    parser.add_argument("--max-inflight-batches", type=int, default=1)
    parser.add_argument("--in-process", action="store_true",
                        help="no HTTP: tasks await the model object directly")
    parser.add_argument("--url", help="measure an already running server instead "
                                      "(loopback only)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON too")
    args = parser.parse_args(argv)
    if not 1 <= args.clients <= 1024 or not 0 < args.duration <= 600:
        raise SystemExit("--clients must be in [1, 1024] and --duration in (0, 600]")
    results = asyncio.run(main_async(args))
    if args.json:
        print(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
