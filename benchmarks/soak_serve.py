"""A long soak of examples/serve_mnist.py under mixed load (issue 28, "long runs").

    python benchmarks/soak_serve.py --minutes 30 [--checkpoint /tmp/qs_model]

Starts the server (uvicorn on 127.0.0.1, a free port, its default limits; flags after
``--`` are passed to it; without ``--checkpoint`` a LeNet is trained first by
``examples/quickstart.py --epochs 1`` into a temporary folder), then for ``--minutes``
drives, all at once, with the clients of ``benchmarks/serve_abuse.py``:

* **normal clients**: ``--keepalive-clients`` (3) on keep-alive connections and
  ``--fresh-clients`` (1) opening a new connection per request, each posting a real
  digit at a steady pace, ``--rate`` (8) requests a second in all, checking every answer
  (status 200 and the probabilities given before the soak) and timing it;
* **bombs**, a round every ``--bomb-every`` s (10): one of each of serve_abuse's JSON
  bombs (1.3 M empty lists, 900 deep, not JSON, NaN) and PNG bombs (a gigapixel header,
  100,000 chunks, a decoded megapixel, a bad CRC), a body declaring 5 MB, a chunked body
  streaming past 4 MB, and a 3.8 MB multipart bomb (4 connections at a time);
* **slowloris**: ``--slowloris`` (20) connections trickling a request head a byte a
  second, each reopened when the server closes it (its 10 s head deadline);
* **disconnects**, ``--disconnects`` (2) a second: a client sends half of a predict's
  body and closes (every other one with a TCP reset), or sends a whole predict and
  closes without reading the answer.

Every ``--sample-every`` s (5) it reads the server's RSS (``VmRSS`` in
``/proc/PID/status``); every minute it records the RSS, the normal clients' p50/p99
latency and success rate, each abuse kind's statuses, the server's own response counts
from ``/metrics`` (its 499s are the disconnects it saw), the CPU the server and this
process used, and the host's load average. At the end: a table per minute, then the
verdict (exit status 1 if it fails):

* **RSS flat after warm-up** (the first ``--warmup-minutes``, default 5, or a third of a
  shorter run): over the RSS samples of the last 10 minutes (at most the post-warm-up
  part), the least-squares slope is under ``--rss-slope`` MiB/min (0.25) and max - min
  under ``--rss-band`` MiB (8). Why these: a leak of 1 KiB per normal request is 0.47
  MiB/min at 8 req/s, and a leak of any bomb body (0.5 to 4.6 MB, six rounds a minute)
  is 3 MiB/min or more, both well above 0.25; the band allows the allocator to keep
  one or two of the 4 MB bodies it was handed (glibc keeps freed heap for reuse), and no
  more.
* **p99 stable**: the normal clients' p99 over the last third of the post-warm-up
  minutes within 1.5x that of the first third (or 10 ms above it, whichever is more:
  on a shared 2-core host a 10 ms p99 moves by a scheduler time slice or two).
* **served**: at least 99.9% of normal requests answered 200 with the right
  probabilities; no abuse request answered 500 or left without an answer (hung); the
  server alive and healthy at the end, with no traceback in its log.

The pace, on the 2-vCPU host of docs/benchmarks.md: the server spends about a quarter
of a core (23% and 29% on average in the two runs there, at most 39% in a minute: mostly
8 LeNet steps a second of its batch-64 job, then the bomb rounds' parsing) and this
process under 2% (its clients; the bombs' bodies are built once): under half a core
each, so it can run beside the training soak (benchmarks/soak_train.py). Each minute's
row shows the measured figures.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_abuse as abuse  # noqa: E402
from serve_load import ROOT, Connection, request_bodies  # noqa: E402
from soak_common import (cpu_seconds, load_average, p99_stable, percentiles,  # noqa: E402
                         rss_flat, rss_mib)

PREDICT = abuse.PREDICT


# -- the abuse kinds not in serve_abuse: disconnects -------------------------------------------

async def disconnect_mid_body(port: int, body: bytes, reset: bool) -> str:
    """Half of a predict's body, then close (with a TCP reset if ``reset``)."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        return f"connect: {type(exc).__name__}"
    try:
        writer.write(abuse.post_head(PREDICT, len(body)) + body[:len(body) // 2])
        await writer.drain()
        await asyncio.sleep(0.05)
        if reset:  # SO_LINGER 0: close() sends RST instead of FIN
            writer.get_extra_info("socket").setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        return "reset mid-body" if reset else "closed mid-body"
    except OSError as exc:
        return type(exc).__name__
    finally:
        writer.close()


async def disconnect_before_answer(port: int, body: bytes) -> str:
    """A whole predict, then close without reading the answer."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        return f"connect: {type(exc).__name__}"
    try:
        writer.write(abuse.post_head(PREDICT, len(body)) + body)
        await writer.drain()
        return "closed before the answer"
    except OSError as exc:
        return type(exc).__name__
    finally:
        writer.close()


# -- bombs: one of each of serve_abuse's, and the oversized ones -------------------------------

def bomb_round(port: int) -> dict:
    """The coroutines of one round, by kind: each answers a status (or what happened)."""
    chunked = (f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               .encode())
    jobs = {f"json: {kind}": abuse.post(port, PREDICT, body)
            for kind, (body, _) in BODIES["json"].items()}
    jobs.update({f"png: {kind}": abuse.post(port, abuse.PNG, body, "image/png")
                 for kind, (body, _) in BODIES["png"].items()})
    jobs["declared 5 MB"] = abuse.raw_request(port, abuse.post_head(PREDICT, 5_000_000))
    jobs["chunked past 4 MB"] = abuse.raw_request(port, chunked, BODIES["chunked"])
    jobs["multipart bomb"] = abuse.post(port, abuse.PNG, BODIES["multipart"],
                                        "multipart/form-data; boundary=XyZ")
    return jobs


BODIES: dict = {}


def build_bodies() -> None:
    piece = b" " * 65536
    BODIES["json"] = abuse.json_bodies()
    BODIES["png"] = abuse.png_bodies()
    BODIES["chunked"] = (b"%x\r\n" % len(piece) + piece + b"\r\n") * 70  # 4.6 MB, unended
    BODIES["multipart"] = (b"--XyZ\r\n" + b"Content-Type: multipart/mixed; boundary=XyZ"
                           b"\r\n\r\n--XyZ\r\n" * 70000 + b"--XyZ--\r\n")


# -- measuring -------------------------------------------------------------------------------

def self_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def server_counts(text: str) -> dict:
    """``{"predict 499": n, ...}`` from the server's /metrics."""
    counts = {}
    for line in text.splitlines():
        if line.startswith("serve_mnist_http_responses_total{"):
            labels, _, value = line.partition("} ")
            fields = dict(part.split("=") for part in labels.split("{", 1)[1].split(","))
            counts[f"{fields['route'].strip(chr(34))} {fields['status'].strip(chr(34))}"] = \
                int(float(value))
    return counts


def _diff(now: dict, before: dict) -> dict:
    return {k: v - before.get(k, 0) for k, v in sorted(now.items()) if v - before.get(k, 0)}


class Tally:
    """Outcomes by kind, cumulative; ``minute()`` gives those since the last call."""

    def __init__(self):
        self.total, self._last = {}, {}

    def add(self, kind: str, outcome) -> None:
        key = (kind, str(outcome))
        self.total[key] = self.total.get(key, 0) + 1

    def minute(self) -> dict:
        out = {k: v - self._last.get(k, 0) for k, v in self.total.items()
               if v - self._last.get(k, 0)}
        self._last = dict(self.total)
        return out


# -- the soak --------------------------------------------------------------------------------

async def _every(seconds: float, stop: asyncio.Event, action) -> None:
    """``action()`` every ``seconds`` (started as tasks: a slow one does not delay the
    next) until ``stop``."""
    pending = set()
    next_at = time.perf_counter()
    while not stop.is_set():
        task = asyncio.ensure_future(action())
        pending.add(task)
        task.add_done_callback(pending.discard)
        next_at += seconds
        try:
            await asyncio.wait_for(stop.wait(), max(0.0, next_at - time.perf_counter()))
        except asyncio.TimeoutError:
            pass
    if pending:
        await asyncio.wait(pending, timeout=60)


def _log(*parts) -> None:
    print(*parts, flush=True)


async def soak(args, server_flags, log=_log) -> dict:
    build_bodies()
    server_log = open(args.server_log, "wb")
    process, port = await abuse.start_server(args.checkpoint, args.model, server_flags,
                                             stderr=server_log)
    try:
        return await _drive(args, process, port, log)
    finally:
        await abuse.stop_server(process)
        server_log.close()


async def _drive(args, process, port: int, log) -> dict:
    body = request_bodies(1)[0]
    expected = await abuse.warm_up(port, body)
    clients = args.keepalive_clients + args.fresh_clients
    probers = [abuse.Prober(port, body, expected, every=clients / args.rate,
                            fresh=i >= args.keepalive_clients) for i in range(clients)]
    stop = asyncio.Event()
    abuses = Tally()
    slowloris_outcomes: dict = {}

    async def one_bomb_round():
        jobs = bomb_round(port)
        results = await abuse._at_most(4, list(jobs.values()))
        for kind, outcome in zip(jobs, results):
            abuses.add(kind, outcome)

    flip = [0]

    async def one_disconnect():
        flip[0] += 1
        kind = flip[0] % 3
        if kind == 2:
            outcome = await disconnect_before_answer(port, body)
        else:
            outcome = await disconnect_mid_body(port, body, reset=kind == 1)
        abuses.add("disconnect", outcome)

    for prober in probers:   # spread over one period, not all at once
        prober.start()
        await asyncio.sleep(prober.every / clients)
    tricklers = [asyncio.ensure_future(abuse._trickler(port, stop, slowloris_outcomes))
                 for _ in range(args.slowloris)]
    drivers = [asyncio.ensure_future(_every(args.bomb_every, stop, one_bomb_round)),
               asyncio.ensure_future(_every(1 / args.disconnects, stop, one_disconnect))]

    started = time.perf_counter()
    rss_samples = []          # (minutes since start, MiB)
    minutes = []
    last = {"server_cpu": cpu_seconds(process.pid), "self_cpu": self_cpu_seconds(),
            "metrics": {}, "slowloris": {}, "t": started}
    metrics_connection = Connection("127.0.0.1", port)
    for minute in range(args.minutes):
        minute_end = started + 60 * (minute + 1)
        while time.perf_counter() < minute_end:
            if process.poll() is not None:
                break
            rss_samples.append(((time.perf_counter() - started) / 60, rss_mib(process.pid)))
            await asyncio.sleep(min(args.sample_every, max(0.0, minute_end - time.perf_counter())))
        if process.poll() is not None:
            log(f"the server exited (status {process.returncode}) in minute {minute + 1}")
            break
        now = time.perf_counter()
        try:
            status, text = await asyncio.wait_for(metrics_connection.get("/metrics"), 30)
            metrics = server_counts(text.decode()) if status == 200 else last["metrics"]
        except (OSError, asyncio.TimeoutError, ValueError, IndexError):
            metrics = last["metrics"]
        samples = [(s, ok) for prober in probers for t, s, ok in prober.samples
                   if last["t"] <= t < now]
        p50, p99 = percentiles([s for s, ok in samples if ok])
        server_cpu, self_cpu = cpu_seconds(process.pid), self_cpu_seconds()
        row = {"minute": minute + 1, "rss_mib": rss_samples[-1][1],
               "requests": len(samples), "ok": sum(ok for _, ok in samples),
               "p50_ms": p50, "p99_ms": p99,
               "abuse": {f"{k} -> {o}": n for (k, o), n in sorted(abuses.minute().items())},
               "slowloris": _diff(slowloris_outcomes, last["slowloris"]),
               "server_responses": _diff(metrics, last["metrics"]),
               "server_cpu": (server_cpu - last["server_cpu"]) / (now - last["t"]),
               "self_cpu": (self_cpu - last["self_cpu"]) / (now - last["t"]),
               "load1": load_average()}
        minutes.append(row)
        log(_row_line(row))
        last = {"server_cpu": server_cpu, "self_cpu": self_cpu, "metrics": metrics,
                "slowloris": dict(slowloris_outcomes), "t": now}
    stop.set()
    await asyncio.gather(*drivers, *tricklers)
    for prober in probers:
        await prober.stop()
    await metrics_connection.close()
    healthy = False
    if process.poll() is None:
        try:
            healthy = (await Connection("127.0.0.1", port).get("/healthz"))[0] == 200
        except OSError:
            pass
    samples = [(t - started, s, ok) for prober in probers for t, s, ok in prober.samples]
    return {"minutes": minutes, "rss_samples": rss_samples, "samples": samples,
            "abuse_total": {f"{k} -> {o}": n for (k, o), n in sorted(abuses.total.items())},
            "slowloris_total": dict(slowloris_outcomes), "healthy_at_end": healthy,
            "server_alive": process.poll() is None}


# -- the report and the verdict ----------------------------------------------------------------

def _row_line(row: dict) -> str:
    kinds = {}
    for key, n in row["abuse"].items():
        kind, _, outcome = key.partition(" -> ")
        kinds.setdefault(kind.split(":")[0], {}).setdefault(outcome, 0)
        kinds[kind.split(":")[0]][outcome] += n
    abuse_text = "; ".join(f"{k} " + ",".join(f"{o}x{n}" for o, n in sorted(v.items()))
                           for k, v in sorted(kinds.items()))
    ok = 100 * row["ok"] / row["requests"] if row["requests"] else float("nan")
    slow = row["slowloris"]
    return (f"{row['minute']:4d} {row['rss_mib']:7.1f} {row['requests']:5d} {ok:7.2f}% "
            f"{row['p50_ms']:7.1f} {row['p99_ms']:7.1f} {100 * row['server_cpu']:5.1f}% "
            f"{100 * row['self_cpu']:5.1f}% {row['load1']:5.2f}  slowloris "
            f"{slow.get('connections', 0)} opened, {slow.get('closed by the server', 0)} "
            f"closed | server 499s {sum(n for k, n in row['server_responses'].items() if k.endswith(' 499'))}"
            f" | {abuse_text}")


HEADER = (" min RSS MiB  reqs     ok%  p50 ms  p99 ms server  self load1  abuse (kind: "
          "outcome x count)")


def verdict(results: dict, args, log=print) -> list[str]:
    """The failed checks (empty: passed), each explained; the figures logged."""
    total = args.minutes
    warm = args.warmup_minutes if args.warmup_minutes is not None else min(5, total / 3)
    failures, line = rss_flat(results["rss_samples"], warm, total, args.rss_slope,
                              args.rss_band, "server RSS")
    log(line)
    samples = [(t / 60, s, ok) for t, s, ok in results["samples"]]
    bad, line, results["p99"] = p99_stable([(m, s) for m, s, ok in samples if ok], warm,
                                           total, 1.5, 10.0, "normal clients")
    log(line)
    failures += bad
    answered = sum(ok for _, _, ok in samples)
    rate = answered / len(samples) if samples else 0.0
    log(f"normal requests: {answered} of {len(samples)} answered right "
        f"({100 * rate:.3f}%)")
    if rate < 0.999:
        failures.append(f"only {100 * rate:.3f}% of normal requests answered right")
    bad = {k: n for k, n in results["abuse_total"].items()
           if k.endswith(" -> 500") or k.endswith("no answer")}
    log("abuse, the whole run: " + "; ".join(f"{k}: {n}" for k, n in
                                              results["abuse_total"].items()))
    log(f"slowloris, the whole run: {results['slowloris_total']}")
    if bad:
        failures.append(f"abuse requests answered 500 or left hanging: {bad}")
    if not results["server_alive"] or not results["healthy_at_end"]:
        failures.append("the server is not alive and healthy at the end")
    with open(args.server_log, "rb") as file:
        text = file.read().decode(errors="replace")
    if "Traceback" in text:
        failures.append(f"a traceback in the server's log ({args.server_log})")
    cpu = [(r["server_cpu"], r["self_cpu"], r["load1"]) for r in results["minutes"]]
    if cpu:
        log(f"CPU, mean over the run: server {100 * np.mean([c[0] for c in cpu]):.1f}% of a "
            f"core, load generator {100 * np.mean([c[1] for c in cpu]):.1f}%; host load "
            f"average (1 min) {min(c[2] for c in cpu):.2f}-{max(c[2] for c in cpu):.2f}, mean "
            f"{np.mean([c[2] for c in cpu]):.2f}")
    return failures


def _quickstart_checkpoint(workdir: str, model: str) -> str:
    path = os.path.join(workdir, "model")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get(
        "PYTHONPATH")])))
    subprocess.run([sys.executable, os.path.join(ROOT, "examples", "quickstart.py"),
                    "--epochs", "1", "--model", model, "--checkpoint", path,
                    "--log-dir", os.path.join(workdir, "log")],
                   check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return path


def main(argv=None) -> int:
    argv, server_flags = abuse.split_server_flags(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=30)
    parser.add_argument("--checkpoint", default=None,
                        help="saved by examples/quickstart.py (default: train one first)")
    parser.add_argument("--model", choices=("lenet", "mlp"), default="lenet")
    parser.add_argument("--rate", type=float, default=8.0,
                        help="normal requests a second, all clients together")
    parser.add_argument("--keepalive-clients", type=int, default=3)
    parser.add_argument("--fresh-clients", type=int, default=1)
    parser.add_argument("--bomb-every", type=float, default=10.0)
    parser.add_argument("--slowloris", type=int, default=20)
    parser.add_argument("--disconnects", type=float, default=2.0, help="a second")
    parser.add_argument("--sample-every", type=float, default=5.0)
    parser.add_argument("--warmup-minutes", type=float, default=None)
    parser.add_argument("--rss-slope", type=float, default=0.25, help="MiB/min")
    parser.add_argument("--rss-band", type=float, default=8.0, help="MiB")
    parser.add_argument("--server-log", default=None,
                        help="the server's stderr (default: a temporary file)")
    parser.add_argument("--json", default=None, help="write the figures to this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="soak_serve_") as workdir:
        if args.checkpoint is None:
            print("training a checkpoint (examples/quickstart.py --epochs 1) ...", flush=True)
            args.checkpoint = _quickstart_checkpoint(workdir, args.model)
        if args.server_log is None:
            args.server_log = os.path.join(tempfile.gettempdir(),
                                           f"soak_serve_server_{os.getpid()}.log")
        print(f"server log: {args.server_log}\n{HEADER}", flush=True)
        results = asyncio.run(soak(args, server_flags))
    failures = verdict(results, args)
    if args.json:
        with open(args.json, "w") as file:
            json.dump({k: v for k, v in results.items() if k != "samples"}, file, indent=1)
    print("verdict: " + ("PASS" if not failures else "FAIL\n  " + "\n  ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
