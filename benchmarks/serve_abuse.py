"""examples/serve_mnist.py under abuse, while a normal client keeps asking (issues 17, 28).

    python examples/quickstart.py                      # saves ./quickstart_model (LeNet)
    python benchmarks/serve_abuse.py --checkpoint ./quickstart_model

Starts the server (uvicorn on 127.0.0.1, a free port, its default limits unless flags are
passed after ``--``), then runs the abuse phases one after another. Throughout, a
*prober* posts one real digit to ``:predict`` every 50 ms on its own connection and
checks the answer (status 200 and the same probabilities as before the abuse); each
phase reports the abusive requests' statuses and the prober's p50/p99 latency and errors
meanwhile. The server's RSS (from /proc) is read after the warm-up, at the peak, and
after the last phase. Phases:

* ``slowloris``: 100 connections trickle a request head, a byte every 0.5 s, for 10 s;
* ``stalled-bodies``: 100 connections send 3.9 MB of a declared 4 MB body and stall;
* ``oversized``: 200 bodies declaring 5 MB, 10 chunked bodies streaming past 4 MB;
* ``png-bombs`` (32 connections at a time, as the next phase): 100 headers claiming 40,000x40,000 pixels, 20 megapixel PNGs in
  100,000 small chunks, 50 PNGs of a million black pixels (under the cap, decoded),
  100 with a bad CRC;
* ``json-bombs``: 20 bodies of 1.3 million empty lists (3.9 MB), 100 nested 900 deep,
  100 not JSON, 100 with NaN;
* ``multipart-bomb``: 8 of the issue's 3.8 MB bodies of 70,000 nested empty parts;
* ``flood``: 400 connections at once, each posting a NaN (400 x 400: under every cap);
* ``burst`` (issue 28): ``--burst`` (2,000) simultaneous predicts of a real digit, each on
  its own connection, retrying a 503 after its ``Retry-After`` up to 20 times: how many
  are answered, the first answers' statuses, the time to the final answer;
* ``slowloris-500`` (issue 28): ``--normal-clients`` (8) closed-loop clients, a new
  connection per request, run ``--slowloris-seconds`` (15) alone, then as long again
  while ``--slowloris`` (500) connections trickle a request head, a byte a second
  (reconnecting when closed), then alone again: the clients' rate under attack over
  their mean unloaded rate.

``--phases burst,slowloris-500`` runs only those (the issue's figures).

Bounded: loopback only, each phase at most ``--phase-timeout`` seconds (default 40), 60 s
for the server to start.
"""
import argparse
import asyncio
import json
import os
import resource
import struct
import subprocess
import sys
import time
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_load import (ROOT, SERVER, Connection, _free_port, request_bodies,  # noqa: E402
                        stop_server)
from soak_common import rss_mib  # noqa: E402

PREDICT = "/v1/models/mnist:predict"
PNG = "/v1/models/mnist:classify-png"
PROBE_EVERY = 0.05


# -- raw clients -----------------------------------------------------------------------------

async def raw_request(port: int, head: bytes, body: bytes = b"", stall: float = 0.0,
                      timeout: float = 40.0):
    """Send ``head + body`` (then wait ``stall`` s without sending more); the status the
    server answers, or what happened to the connection."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        return f"connect: {type(exc).__name__}"
    try:
        writer.write(head + body)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout)
        return int(line.split()[1]) if line else "closed"
    except asyncio.TimeoutError:
        return "no answer"
    except (OSError, IndexError, ValueError) as exc:
        return type(exc).__name__
    finally:
        writer.close()


def post_head(path: str, length: int, content_type: str = "application/json") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


async def post(port, path, body, content_type="application/json"):
    return await raw_request(port, post_head(path, len(body), content_type), body)


async def trickle_head(port: int, seconds: float):
    """A request head, one byte every 0.5 s, for ``seconds``: what the server did."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        return f"connect: {type(exc).__name__}"
    head = f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\nX-Slow: {'a' * 1000}".encode()
    deadline = time.monotonic() + seconds
    try:
        for byte in head:
            if time.monotonic() > deadline:
                return "still open at the end"
            writer.write(bytes([byte]))
            await writer.drain()
            try:
                if await asyncio.wait_for(reader.read(1), 0.5) == b"":
                    return "closed by the server"
            except asyncio.TimeoutError:
                pass
        return "head sent"
    except OSError:
        return "closed by the server"
    finally:
        writer.close()


# -- bodies --------------------------------------------------------------------------------

def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(width: int, height: int, data_chunks) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + b"".join(chunk(b"IDAT", d) for d in data_chunks) + chunk(b"IEND", b""))


def png_bodies():
    megapixel = zlib.compress(b"\x00" * (1025 * 1024), 9)
    stored = zlib.compress(b"\x00" * (1001 * 1000), 0)
    many = [stored[i:i + 10] for i in range(0, len(stored), 10)]
    good = png(28, 28, [zlib.compress(b"\x00" * (29 * 28))])
    bad_crc = bytearray(good)
    bad_crc[-13] ^= 0xFF  # the IDAT chunk's CRC
    return {"gigapixel header": (png(40_000, 40_000, []), 100),
            "100,000 chunks": (png(1000, 1000, many), 20),
            "megapixel, decoded": (png(1024, 1024, [megapixel]), 50),
            "bad CRC": (bytes(bad_crc), 100)}


def json_bodies():
    return {"1.3M empty lists": (b'{"instances": [' + b"[]," * 1_300_000 + b"[]]}", 20),
            "900 deep": (b'{"instances": [' + b"[" * 900 + b"0" + b"]" * 900 + b"]}", 100),
            "not JSON": (b"\xff\xfe not json at all", 100),
            "NaN": (b'{"instances": [[NaN' + b", 0" * 783 + b"]]}", 100)}


# -- phases ----------------------------------------------------------------------------------

async def phase_slowloris(port):
    return await asyncio.gather(*(trickle_head(port, 10.0) for _ in range(100)))


async def phase_stalled_bodies(port):
    head = post_head(PREDICT, 4_000_000)
    return await asyncio.gather(*(raw_request(port, head, b" " * 3_900_000)
                                  for _ in range(100)))


async def phase_oversized(port):
    declared = [raw_request(port, post_head(PREDICT, 5_000_000), b"") for _ in range(200)]
    piece = b" " * 65536
    chunked = (f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               .encode())
    body = (b"%x\r\n" % len(piece) + piece + b"\r\n") * 70  # 4.6 MB, never terminated
    streamed = [raw_request(port, chunked, body) for _ in range(10)]
    return await asyncio.gather(*declared, *streamed)


async def _at_most(concurrency: int, jobs):
    """Run the coroutines ``concurrency`` at a time (all at once, hundreds of connections
    would only meet the server's connection cap: 503 before any body is parsed)."""
    gate = asyncio.Semaphore(concurrency)

    async def gated(job):
        async with gate:
            return await job
    return await asyncio.gather(*(gated(job) for job in jobs))


async def phase_png_bombs(port):
    return await _at_most(32, [post(port, PNG, body, "image/png")
                               for body, count in png_bodies().values() for _ in range(count)])


async def phase_json_bombs(port):
    return await _at_most(32, [post(port, PREDICT, body)
                               for body, count in json_bodies().values() for _ in range(count)])


async def phase_multipart_bomb(port):
    body = (b"--XyZ\r\n" + b"Content-Type: multipart/mixed; boundary=XyZ\r\n\r\n--XyZ\r\n" * 70000
            + b"--XyZ--\r\n")
    return await asyncio.gather(*(post(port, PNG, body, "multipart/form-data; boundary=XyZ")
                                  for _ in range(8)))


async def phase_flood(port):
    return await asyncio.gather(*(post(port, PREDICT, b'{"instances": [[NaN]]}')
                                  for _ in range(400)))


# -- issue 28: a burst, and slowloris at scale -------------------------------------------------

BURST_SETTINGS = {"clients": 2000, "retries": 20, "slowloris": 500, "seconds": 15.0,
                  "normal": 8}


async def predict_once(port: int, request: bytes, timeout: float = 60.0):
    """A new connection, one predict: (status or what happened, Retry-After or None)."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        return f"connect: {type(exc).__name__}", None
    try:
        writer.write(request)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
        retry_after, length = None, 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"retry-after":
                retry_after = float(value)
            elif name.strip().lower() == b"content-length":
                length = int(value)
        await asyncio.wait_for(reader.readexactly(length), timeout)
        return int(head.split()[1]), retry_after
    except asyncio.TimeoutError:
        return "no answer", None
    except (OSError, asyncio.IncompleteReadError, IndexError, ValueError) as exc:
        return type(exc).__name__, None
    finally:
        writer.close()


def _predict_request(body: bytes) -> bytes:
    return post_head(PREDICT, len(body)) + body


def _ms(seconds) -> dict:
    ms = np.array(seconds) * 1000
    return {"p50_ms": float(np.percentile(ms, 50)) if ms.size else float("nan"),
            "p99_ms": float(np.percentile(ms, 99)) if ms.size else float("nan"),
            "max_ms": float(ms.max()) if ms.size else float("nan")}


async def phase_burst(port):
    """``clients`` predicts at once, each retrying 503 (after Retry-After) ``retries`` times."""
    request = _predict_request(BODY[0])
    started = time.perf_counter()

    async def client():
        first, attempts = None, 0
        while True:
            attempts += 1
            status, retry_after = await predict_once(port, request)
            first = status if first is None else first
            if status != 503 or attempts > BURST_SETTINGS["retries"]:
                return first, status, attempts, time.perf_counter() - started
            await asyncio.sleep(retry_after or 1.0)
    results = await asyncio.gather(*(client() for _ in range(BURST_SETTINGS["clients"])))
    answered = [seconds for _, status, _, seconds in results if status == 200]
    return {"answers": [status for _, status, _, _ in results],
            "first_answers": _tally(first for first, _, _, _ in results),
            "answered": len(answered), "clients": len(results),
            "attempts_max": max(attempts for _, _, attempts, _ in results),
            "time_to_answer": _ms(answered)}


async def _normal_rate(port, request, seconds: float) -> dict:
    """``normal`` closed-loop clients, a new connection per request, for ``seconds``."""
    latencies, failures = [], {}
    deadline = time.perf_counter() + seconds

    async def client():
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            status, _ = await predict_once(port, request, timeout=30)
            if status == 200:
                latencies.append(time.perf_counter() - started)
            else:
                failures[str(status)] = failures.get(str(status), 0) + 1
    began = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(BURST_SETTINGS["normal"])))
    elapsed = time.perf_counter() - began
    return {"ok": len(latencies), "failed": failures, "per_second": len(latencies) / elapsed,
            **_ms(latencies)}


async def _trickler(port: int, stop: asyncio.Event, outcomes: dict) -> None:
    """A request head a byte a second; when the server closes it, a new one. (As cheap
    as an attacker can make it: this process shares the machine with the server.)"""
    head = f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\nX-Slow: {'a' * 1000}".encode()

    def count(what):
        outcomes[what] = outcomes.get(what, 0) + 1
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError as exc:
            count(f"connect: {type(exc).__name__}")
            await asyncio.sleep(1.0)
            continue
        count("connections")
        try:
            for byte in head:
                if reader.at_eof() or reader.exception() is not None:
                    count("closed by the server")
                    break
                writer.write(bytes([byte]))
                await asyncio.sleep(1.0)
                if stop.is_set():
                    break
        except OSError:
            count("closed by the server")
        finally:
            writer.close()


async def phase_slowloris_500(port):
    """The normal clients alone, with the slowloris, alone again (the host drifts: the
    ratio is over the mean of the two unloaded rates)."""
    request = _predict_request(BODY[0])
    seconds = BURST_SETTINGS["seconds"]
    before = await _normal_rate(port, request, seconds)
    stop, outcomes = asyncio.Event(), {}
    tricklers = [asyncio.ensure_future(_trickler(port, stop, outcomes))
                 for _ in range(BURST_SETTINGS["slowloris"])]
    await asyncio.sleep(2.0)  # all of them open and trickling
    loaded = await _normal_rate(port, request, seconds)
    stop.set()
    await asyncio.gather(*tricklers)
    after = await _normal_rate(port, request, seconds)
    unloaded = {"per_second": (before["per_second"] + after["per_second"]) / 2,
                "before": before, "after": after}
    return {"answers": [], "slowloris": outcomes, "unloaded": unloaded, "loaded": loaded,
            "rate_ratio": loaded["per_second"] / unloaded["per_second"]}


BODY = []  # the digit the burst and the normal clients post (set by run())


PHASES = {"slowloris": phase_slowloris, "stalled-bodies": phase_stalled_bodies,
          "oversized": phase_oversized, "png-bombs": phase_png_bombs,
          "json-bombs": phase_json_bombs, "multipart-bomb": phase_multipart_bomb,
          "flood": phase_flood, "burst": phase_burst, "slowloris-500": phase_slowloris_500}


class Prober:
    """One normal client: a real digit every ``every`` s (50 ms), its latency, status and
    answer; on one keep-alive connection, or with ``fresh`` a new connection each time."""

    def __init__(self, port: int, body: bytes, expected, every: float = PROBE_EVERY,
                 fresh: bool = False):
        self.port, self.body, self.expected = port, body, expected
        self.every, self.fresh = every, fresh
        self.samples = []  # (time, seconds, ok)
        self._task = None

    async def _run(self):
        connection = Connection("127.0.0.1", self.port)
        while True:
            started = time.perf_counter()
            try:
                status, payload = await asyncio.wait_for(
                    connection.post(PREDICT, self.body), 30)
                ok = status == 200 and np.allclose(json.loads(payload)["predictions"],
                                                   self.expected, atol=1e-5)
                if self.fresh:
                    await connection.close()
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
                ok = False
                await connection.close()
            self.samples.append((started, time.perf_counter() - started, ok))
            await asyncio.sleep(max(0.0, self.every - (time.perf_counter() - started)))

    def start(self):
        self._task = asyncio.ensure_future(self._run())

    async def stop(self):
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass

    def between(self, start: float, end: float) -> dict:
        chosen = [(s, ok) for t, s, ok in self.samples if start <= t <= end]
        ms = np.array([s for s, _ in chosen]) * 1000
        return {"probes": len(chosen), "failed": sum(not ok for _, ok in chosen),
                "p50_ms": float(np.percentile(ms, 50)) if ms.size else float("nan"),
                "p99_ms": float(np.percentile(ms, 99)) if ms.size else float("nan"),
                "max_ms": float(ms.max()) if ms.size else float("nan")}


def _tally(results) -> dict:
    counts = {}
    for result in results:
        counts[str(result)] = counts.get(str(result), 0) + 1
    return dict(sorted(counts.items()))


async def start_server(checkpoint: str, model: str, server_flags=(),
                       stderr=subprocess.DEVNULL) -> tuple[subprocess.Popen, int]:
    """examples/serve_mnist.py on a free loopback port, answering ``/healthz``:
    (process, port). Raises SystemExit if it exits or is not healthy within 60 s."""
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get(
        "PYTHONPATH")])))
    command = [sys.executable, SERVER, "--checkpoint", checkpoint, "--model", model,
               "--port", str(port), "--no-access-log", "--log-level", "warning",
               *server_flags]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stderr=stderr)
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise SystemExit("the server exited during startup")
        try:
            if (await Connection("127.0.0.1", port).get("/healthz"))[0] == 200:
                return process, port
        except OSError:
            pass
        if time.monotonic() > deadline:
            await stop_server(process)
            raise SystemExit("the server did not start within 60 s")
        await asyncio.sleep(0.2)


async def warm_up(port: int, body: bytes, requests: int = 50):
    """``requests`` predicts of ``body``: the probabilities every later answer must give."""
    connection = Connection("127.0.0.1", port)
    for _ in range(requests):
        status, payload = await connection.post(PREDICT, body)
    await connection.close()
    return json.loads(payload)["predictions"]


async def run(args, server_flags) -> dict:
    process, port = await start_server(args.checkpoint, args.model, server_flags)
    try:
        body = request_bodies(1)[0]
        BODY[:] = [body]
        expected = await warm_up(port, body)
        prober = Prober(port, body, expected)
        prober.start()
        await asyncio.sleep(2)
        results = {"rss_warm_mib": rss_mib(process.pid), "phases": {}}
        peak = results["rss_warm_mib"]
        results["baseline"] = prober.between(0, time.perf_counter())
        for name in args.phases.split(","):
            started = time.perf_counter()
            extra = {}
            try:
                outcome = await asyncio.wait_for(PHASES[name](port), args.phase_timeout)
                if isinstance(outcome, dict):
                    extra = outcome
                    outcome = extra.pop("answers")
                outcome = _tally(outcome)
            except asyncio.TimeoutError:
                outcome = {"phase timed out": 1}
            peak = max(peak, rss_mib(process.pid))
            ended = time.perf_counter()
            results["phases"][name] = {"seconds": ended - started, "answers": outcome,
                                       "prober": prober.between(started, ended), **extra}
            _print(name, results["phases"][name])
        await asyncio.sleep(2)
        await prober.stop()
        results["rss_peak_mib"] = peak
        results["rss_after_mib"] = rss_mib(process.pid)
        results["prober_total"] = prober.between(0, time.perf_counter())
        return results
    finally:
        await stop_server(process)


def _print(name: str, phase: dict) -> None:
    p = phase["prober"]
    answers = ", ".join(f"{k}: {v}" for k, v in phase["answers"].items())
    print(f"{name:>15}: {phase['seconds']:5.1f} s  prober {p['probes']:4d} ok-"
          f"{p['probes'] - p['failed']:<4d} p50 {p['p50_ms']:6.1f} ms  p99 {p['p99_ms']:7.1f} ms"
          f"  max {p['max_ms']:7.1f} ms | {answers}", flush=True)
    if "time_to_answer" in phase:
        t = phase["time_to_answer"]
        print(f"{'':>17}{phase['answered']} of {phase['clients']} answered 200 (first answers: "
              f"{phase['first_answers']}; at most {phase['attempts_max']} attempts); time to "
              f"the answer p50 {t['p50_ms']:.0f} ms, p99 {t['p99_ms']:.0f} ms, max "
              f"{t['max_ms']:.0f} ms", flush=True)
    if "rate_ratio" in phase:
        u, l = phase["unloaded"], phase["loaded"]
        b, a = u["before"], u["after"]
        print(f"{'':>17}normal clients alone: {b['per_second']:.1f} req/s before (p50 "
              f"{b['p50_ms']:.0f} ms, failed {b['failed']}), {a['per_second']:.1f} after (p50 "
              f"{a['p50_ms']:.0f} ms, failed {a['failed']}); with the slowloris: "
              f"{l['per_second']:.1f} req/s (p50 {l['p50_ms']:.0f} ms, p99 {l['p99_ms']:.0f} ms,"
              f" failed {l['failed']}): {100 * phase['rate_ratio']:.0f}%; slowloris "
              f"{phase['slowloris']}", flush=True)


def split_server_flags(argv=None) -> tuple[list, list]:
    """(this script's arguments, the server's: those after ``--``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], argv[at + 1:]
    return argv, []


def main(argv=None) -> dict:
    argv, server_flags = split_server_flags(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default="./quickstart_model")
    parser.add_argument("--model", choices=("lenet", "mlp"), default="lenet")
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--phase-timeout", type=float, default=40.0)
    parser.add_argument("--burst", type=int, default=BURST_SETTINGS["clients"],
                        help="simultaneous predicts of the burst phase")
    parser.add_argument("--retries", type=int, default=BURST_SETTINGS["retries"],
                        help="times a burst client retries a 503")
    parser.add_argument("--slowloris", type=int, default=BURST_SETTINGS["slowloris"],
                        help="trickling connections of the slowloris-500 phase")
    parser.add_argument("--slowloris-seconds", type=float, default=BURST_SETTINGS["seconds"])
    parser.add_argument("--normal-clients", type=int, default=BURST_SETTINGS["normal"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    BURST_SETTINGS.update(clients=args.burst, retries=args.retries, slowloris=args.slowloris,
                          seconds=args.slowloris_seconds, normal=args.normal_clients)
    # this process holds a socket per client: --burst + --slowloris + a few
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.burst + args.slowloris + 256
    if soft != resource.RLIM_INFINITY and soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need if hard == resource.RLIM_INFINITY
                                                    else min(need, hard), hard))
    for name in args.phases.split(","):
        if name not in PHASES:
            raise SystemExit(f"unknown phase {name!r}: use {', '.join(PHASES)}")
    results = asyncio.run(run(args, server_flags))
    base, total = results["baseline"], results["prober_total"]
    print(f"prober before the abuse: p50 {base['p50_ms']:.1f} ms, p99 {base['p99_ms']:.1f} ms; "
          f"over the whole run: {total['probes']} probes, {total['failed']} failed, p50 "
          f"{total['p50_ms']:.1f} ms, p99 {total['p99_ms']:.1f} ms")
    print(f"server RSS: {results['rss_warm_mib']:.0f} MiB after warm-up, "
          f"{results['rss_peak_mib']:.0f} MiB at the peak, {results['rss_after_mib']:.0f} MiB "
          "after the abuse")
    if args.json:
        print(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
