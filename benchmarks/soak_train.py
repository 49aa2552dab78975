"""A long soak of an async training loop with checkpoints, a kill -9 and a resume (issue 28).

    python benchmarks/soak_train.py --minutes 30 [--save-every 60] [--dir DIR]

A child process trains ``examples/async_train.py``'s ``train_job`` (the seed MLP,
784-512-10, Adam, batch 100) on the digits bundled with aioflow
(``examples/mnist_util.load_data`` with ``AIOFLOW_OFFLINE=1``: no download) in an
asyncio loop, ``loss = await train_job(x, y)``, at a fixed pace of ``--pace`` steps a
second (20; one BLAS thread: 15% of a core on the 2-vCPU host of docs/benchmarks.md, so
it can run beside benchmarks/soak_serve.py). Every ``--save-every``
seconds it saves a checkpoint with ``await manager.save()``
(``flow.train.SimpleCheckPointManager``: ``<dir>/snapshot_<time>``, written to a hidden
folder and renamed into place whole) and starts with ``await
manager.initialize_or_restore()`` (the newest whole checkpoint, or a fresh start). The
batch of step ``s`` depends only on ``s`` (epoch ``s // 90`` shuffled by its own seed),
so a resumed run sees the very batches the killed one saw after the same checkpoint.
The child reports every step (step, loss, step time) and every save (its name, its step,
a sha256 of each variable it holds) as JSON lines.

At about the middle of ``--minutes`` (``--kill-at`` seconds) the parent waits for the
child to start a save (after at least one periodic save, so the checkpoint to resume from
is not the initial one) and SIGKILLs it a fraction of a save's duration later (so the kill usually lands inside the
save, leaving a half-written hidden folder), then starts it again. It checks:

* **resumed from the last whole checkpoint**: the second life restored the newest
  checkpoint with ``snapshot_done`` found on disk after the kill, which the first life
  saved (or was saving when killed, if the rename had happened), never the half-written
  one; its step counter is the step that checkpoint was saved at, and its first step is
  the next one;
* **bit for bit**: every variable the second life loaded (weights, Adam's slots, the step
  counter) has the sha256 the first life reported when it saved it, and the files on
  disk (read by ``flow.checkpoint.get``, checksums verified) hash the same;
* **the loss continues**: the second life's losses for the steps the first life had
  already run after that checkpoint equal the first life's (same weights, same batches;
  a resume from the initial weights or another checkpoint would differ at once), within
  1e-5 relative (reported: how many were bit-identical);
* **no leftovers**: the killed save's hidden folder is gone after the second life's
  restore (``SimpleCheckPointManager`` removes dead saves' leftovers);
* **RSS flat after warm-up in each life** (the first ``--warmup-minutes``, default 2,
  of each life, or a third of a shorter one): slope over the rest under ``--rss-slope``
  MiB/min (0.25) and max - min under ``--rss-band`` MiB (8). A leak of 1 KiB per step is
  1.2 MiB/min at 20 steps a second, a leak of a checkpoint's arrays (4.8 MB) per save
  4.6 MiB/min: both far above 0.25. The band allows the allocator to hold on to the
  copies a save makes (two of 4.8 MB);
* **step time p99 stable**: over the post-warm-up minutes of the run (both lives), the
  last third's p99 within 1.5x of the first third's, or ``--p99-slack-ms`` (3 ms) above
  it, whichever is more (a step is a few ms: on a shared host one preemption is that
  much).

Prints a table per minute and the verdict; exit status 1 if any check failed.
``tests/test_soak_train.py`` runs the same parent and child for a few seconds (saves
every second) and checks the resume.
"""

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from soak_common import (cpu_seconds, load_average, p99_stable, percentiles,  # noqa: E402
                         rss_flat, rss_mib)

STEP_COUNTER = "System-Train-TrainStep-train_job"
BATCH_SIZE = 100


# -- the child: the training loop ------------------------------------------------------------

def digests(values: dict) -> dict:
    """sha256 (hex, 16 digits) of each array's bytes, with its dtype and shape."""
    return {name: hashlib.sha256(np.ascontiguousarray(value).tobytes()
                                 + f"{value.dtype}{value.shape}".encode()).hexdigest()[:16]
            for name, value in sorted(values.items())}


async def child_main(args) -> None:
    import asyncio

    import aioflow as flow
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from mnist_util import load_data

    def emit(**event):
        print(json.dumps(event), flush=True)

    flow.random.seed(0)
    from async_train import train_job   # examples/async_train.py: the seed MLP, Adam 1e-3
    (images, labels), _ = load_data(BATCH_SIZE)
    batches = len(images)

    def batch(step: int):
        """The batch of step ``step`` (0-based): a function of the step alone."""
        order = np.random.RandomState(step // batches).permutation(batches)
        i = order[step % batches]
        return images[i], labels[i]

    manager = flow.train.SimpleCheckPointManager(args.child)
    fresh = manager.latest_checkpoint() is None
    await manager.initialize_or_restore()     # with none: initializes and saves a first one
    values = await flow.get_all_variables()
    step = int(values[STEP_COUNTER])
    emit(event="start", pid=os.getpid(), restored=None if fresh else manager.latest_checkpoint(),
         step=step, digests=digests(values), t=time.time())
    if fresh:
        emit(event="saved", name=manager.latest_checkpoint(), step=step,
             digests=digests(values), seconds=None, t=time.time())
    period = 1.0 / args.pace
    last_save = last_report = time.perf_counter()
    pending = []
    next_at = time.perf_counter()
    while time.time() < args.until:
        x, y = batch(step)
        started = time.perf_counter()
        loss = await train_job(x, y)
        seconds = time.perf_counter() - started
        step += 1
        pending.append([step, float(loss.mean()), round(seconds * 1e6), round(time.time(), 3)])
        now = time.perf_counter()
        if now - last_report >= args.report_every or now - last_save >= args.save_every:
            emit(event="steps", steps=pending)
            pending, last_report = [], now
        if now - last_save >= args.save_every:
            emit(event="saving", step=step, t=time.time())
            values = await flow.get_all_variables()
            started = time.perf_counter()
            await manager.save()
            emit(event="saved", name=manager.latest_checkpoint(), step=int(values[STEP_COUNTER]),
                 digests=digests(values), seconds=time.perf_counter() - started, t=time.time())
            last_save = time.perf_counter()
        next_at = max(next_at + period, time.perf_counter() - period)
        await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
    emit(event="steps", steps=pending)
    emit(event="end", step=step)


def _log(*parts) -> None:
    print(*parts, flush=True)


# -- the parent: one life at a time ----------------------------------------------------------

class Life:
    """One run of the child: its events (with the time they arrived) and RSS samples."""

    def __init__(self, number: int, workdir: str, until: float, args, log_path: str):
        self.number = number
        self.events = []
        self.rss = []            # (wall time, MiB)
        self.cpu = []            # (wall time, CPU seconds)
        self._new_event = threading.Condition()
        env = dict(os.environ, AIOFLOW_OFFLINE="1", OPENBLAS_NUM_THREADS="1",
                   OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore",
                   PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get(
                       "PYTHONPATH")])))
        self._stderr = open(log_path, "ab")
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--child", workdir, "--until",
             repr(until), "--pace", str(args.pace), "--save-every", str(args.save_every),
             "--report-every", str(args.report_every)],
            stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=env, cwd=ROOT)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            event["arrived"] = time.time()
            with self._new_event:
                self.events.append(event)
                self._new_event.notify_all()
        with self._new_event:
            self._new_event.notify_all()

    def wait_for(self, kind: str, after: int = 0, timeout: float = 120.0):
        """The first event of ``kind`` at index >= ``after``, waiting up to ``timeout`` s."""
        deadline = time.monotonic() + timeout
        with self._new_event:
            while True:
                for index in range(after, len(self.events)):
                    if self.events[index]["event"] == kind:
                        return index, self.events[index]
                if self.process.poll() is not None and not self._reader.is_alive():
                    return None, None
                left = deadline - time.monotonic()
                if left <= 0:
                    return None, None
                self._new_event.wait(min(left, 1.0))

    def sample(self):
        if self.process.poll() is None:
            now = time.time()
            self.rss.append((now, rss_mib(self.process.pid)))
            try:
                self.cpu.append((now, cpu_seconds(self.process.pid)))
            except OSError:
                pass

    def kill(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self._close()

    def _close(self):
        self._reader.join(10)
        self.process.stdout.close()
        self._stderr.close()

    def finish(self, timeout: float):
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._close()

    def of(self, kind: str) -> list:
        return [e for e in self.events if e["event"] == kind]

    def steps(self) -> list:
        return [s for e in self.of("steps") for s in e["steps"]]


def _whole_checkpoints(workdir: str) -> list[str]:
    return sorted(n for n in os.listdir(workdir) if n.startswith("snapshot_")
                  and os.path.isfile(os.path.join(workdir, n, "snapshot_done")))


def _hidden(workdir: str) -> list[str]:
    return sorted(n for n in os.listdir(workdir) if n.startswith("."))


def _sample_until(lives, condition, every: float, loads: list):
    while not condition():
        for life in lives:
            life.sample()
        loads.append((time.time(), load_average()))
        time.sleep(every)


def run(minutes: float, workdir: str, args, log=_log) -> dict:
    """Both lives; the events, samples and what the kill left. No judging (see check)."""
    started = time.time()
    until = started + 60 * minutes
    kill_after = args.kill_at if args.kill_at is not None else 30 * minutes
    child_log = os.path.join(workdir, "child.log")
    rng = random.Random(args.seed)
    first = Life(1, workdir, until, args, child_log)
    result = {"started": started, "until": until, "lives": [first], "loads": []}
    try:
        _sample_until([first], lambda: time.time() - started >= kill_after
                      or first.process.poll() is not None, args.sample_every,
                      result["loads"])
        if first.process.poll() is not None:
            raise SystemExit(f"the first life exited early (status {first.process.returncode});"
                             f" see {child_log}")
        # the next save after at least one periodic save completed (so the one to
        # resume from is not the initial checkpoint): kill it a fraction of a save's
        # duration after it starts
        after = len(first.events)
        while True:
            after, saving = first.wait_for("saving", after=after,
                                           timeout=args.save_every + 60)
            if saving is None:
                raise SystemExit("the first life started no save after the middle")
            if any(e["seconds"] for e in first.of("saved")):
                break
            after += 1
        durations = [e["seconds"] for e in first.of("saved") if e["seconds"]]
        delay = rng.uniform(0.1, 0.7) * (np.median(durations) if durations else 0.05)
        time.sleep(max(0.0, delay - (time.time() - saving["arrived"])))
        first.kill()
        result["killed_at"] = time.time()
        result["kill_delay"] = delay
        result["saving_step"] = saving["step"]
        result["whole_after_kill"] = _whole_checkpoints(workdir)
        result["hidden_after_kill"] = _hidden(workdir)
        import aioflow as flow   # the files on disk, checksums verified
        newest = result["whole_after_kill"][-1]
        result["disk_digests"] = digests(flow.checkpoint.get(os.path.join(workdir, newest)))
        log(f"killed the first life {time.time() - started:.1f} s in, "
            f"{1000 * delay:.0f} ms into the save of step {saving['step']}; on disk: "
            f"{len(result['whole_after_kill'])} whole checkpoints, the newest {newest}; "
            f"hidden leftovers: {result['hidden_after_kill'] or 'none'}")
        second = Life(2, workdir, until, args, child_log)
        result["lives"].append(second)
        _, start = second.wait_for("start", timeout=120)
        result["hidden_after_restore"] = _hidden(workdir)
        _sample_until([second], lambda: second.process.poll() is not None
                      or time.time() > until + 120, args.sample_every, result["loads"])
        second.finish(timeout=30)
        result["hidden_at_end"] = _hidden(workdir)
        return result
    finally:
        for life in result["lives"]:
            if life.process.poll() is None:
                life.kill()


# -- judging ---------------------------------------------------------------------------------

def check_resume(result: dict, log=print) -> list[str]:
    """The resume checks: which checkpoint, its step, bit for bit, the loss, leftovers."""
    failures = []
    first, second = result["lives"]
    starts = second.of("start")
    if not starts:
        return ["the second life never started"]
    start = starts[0]
    saves = {e["name"]: e for e in first.of("saved")}
    newest = result["whole_after_kill"][-1]
    saving_step = result["saving_step"]
    if start["restored"] != newest:
        failures.append(f"restored {start['restored']}, not the newest whole checkpoint "
                        f"{newest}")
    if newest in saves:
        expected_step, expected = saves[newest]["step"], saves[newest]["digests"]
        landed = "mid-save" if result["hidden_after_kill"] else "after the save's rename"
    else:   # the killed save had renamed its folder in, but not reported it
        expected_step, expected = saving_step, result["disk_digests"]
        landed = "after the save's rename, before it was reported"
    log(f"resume: the kill landed {landed}; restored {start['restored']} at step "
        f"{start['step']} (the first life saved it at step {expected_step}; it was saving "
        f"step {saving_step} when killed)")
    if start["step"] != expected_step:
        failures.append(f"resumed at step {start['step']}, the checkpoint holds step "
                        f"{expected_step}")
    if start["digests"] != expected:
        differ = sorted(k for k in set(expected) | set(start["digests"])
                        if expected.get(k) != start["digests"].get(k))
        failures.append(f"loaded variables differ from the saved ones: {differ}")
    if result["disk_digests"] != expected:
        failures.append("the files on disk differ from what the first life saved")
    if not failures:
        log(f"resume: all {len(expected)} variables loaded bit for bit as saved (sha256), "
            "and as the files on disk")
    steps2 = second.steps()
    if not steps2 or steps2[0][0] != start["step"] + 1:
        failures.append(f"the second life's first step is "
                        f"{steps2[0][0] if steps2 else None}, not {start['step'] + 1}")
    losses1 = {s[0]: s[1] for s in first.steps()}
    replayed = [(s[0], losses1[s[0]], s[1]) for s in steps2 if s[0] in losses1]
    if not replayed:
        failures.append("no step of the second life replays one of the first life's")
    else:
        a = np.array([r[1] for r in replayed])
        b = np.array([r[2] for r in replayed])
        relative = np.abs(a - b) / np.maximum(np.abs(a), 1e-12)
        initial = first.steps()[0][1]
        log(f"loss: the second life replayed steps {replayed[0][0]}-{replayed[-1][0]} of the "
            f"first: {int((a == b).sum())} of {len(a)} losses bit-identical, largest relative "
            f"difference {relative.max():.2e}; loss {b[0]:.4f} at its first step (the first "
            f"life's initial loss: {initial:.4f})")
        if relative.max() > 1e-5:
            failures.append(f"the second life's losses differ from the first's for the same "
                            f"steps (up to {relative.max():.2e} relative)")
    leftovers = result["hidden_after_restore"]
    log(f"leftovers: after the kill {result['hidden_after_kill'] or 'none'}, after the "
        f"restore {leftovers or 'none'}, at the end {result.get('hidden_at_end') or 'none'}")
    if leftovers:
        failures.append(f"leftovers of the killed save after the restore: {leftovers}")
    if second.process.returncode != 0:
        failures.append(f"the second life exited with status {second.process.returncode}")
    return failures


def per_minute(result: dict) -> list[dict]:
    rows = []
    started = result["started"]
    for life in result["lives"]:
        steps = life.steps()
        saves = life.of("saved")
        for minute in sorted({int((s[3] - started) // 60) for s in steps}):
            chosen = [s for s in steps if int((s[3] - started) // 60) == minute]
            rss = [v for t, v in life.rss if int((t - started) // 60) == minute]
            cpu = [(t, c) for t, c in life.cpu if int((t - started) // 60) == minute]
            p50, p99 = percentiles([s[2] / 1e6 for s in chosen])
            rows.append({"minute": minute + 1, "life": life.number, "steps": len(chosen),
                         "first_step": chosen[0][0], "last_step": chosen[-1][0],
                         "loss": float(np.mean([s[1] for s in chosen])),
                         "p50_ms": p50, "p99_ms": p99,
                         "rss_mib": rss[-1] if rss else float("nan"),
                         "cpu": ((cpu[-1][1] - cpu[0][1]) / (cpu[-1][0] - cpu[0][0])
                                 if len(cpu) > 1 and cpu[-1][0] > cpu[0][0] else float("nan")),
                         "saves": sum(int((e["t"] - started) // 60) == minute for e in saves),
                         "load1": next((v for t, v in reversed(result["loads"])
                                        if int((t - started) // 60) == minute), float("nan"))})
    return rows


def check_long(result: dict, minutes: float, args, log=print) -> list[str]:
    """RSS flat after warm-up in each life; step time p99 stable."""
    failures = []
    started = result["started"]
    warmups = []
    for life in result["lives"]:
        if len(life.rss) < 2:
            continue
        begin = (life.rss[0][0] - started) / 60
        end = (life.rss[-1][0] - started) / 60
        warm = begin + (args.warmup_minutes if args.warmup_minutes is not None
                        else min(2.0, (end - begin) / 3))
        warmups.append((warm, end))
        bad, line = rss_flat([((t - started) / 60, v) for t, v in life.rss], warm, end,
                             args.rss_slope, args.rss_band, f"RSS, life {life.number}")
        log(line)
        failures += bad
    # step times after each life's warm-up, thirds of those minutes
    samples = []
    for life, (warm, end) in zip(result["lives"], warmups):
        samples += [((s[3] - started) / 60, s[2] / 1e6) for s in life.steps()
                    if warm <= (s[3] - started) / 60 <= end]
    if samples:
        samples.sort()
        bad, line, figures = p99_stable(samples, samples[0][0], samples[-1][0], 1.5,
                                        args.p99_slack_ms, "step time (both lives, after "
                                        "each warm-up)")
        result["p99"] = figures
        log(line)
        failures += bad
    cpu = [r["cpu"] for r in per_minute(result) if not np.isnan(r["cpu"])]
    if cpu:
        log(f"CPU of the child, mean over the minutes: {100 * np.mean(cpu):.1f}% of a core")
    return failures


def _print_table(rows, log=print):
    log(" min life  steps  first-last step    loss  p50 ms  p99 ms RSS MiB   CPU saves load1")
    for r in rows:
        log(f"{r['minute']:4d} {r['life']:4d} {r['steps']:6d} {r['first_step']:7d}-"
            f"{r['last_step']:<7d} {r['loss']:7.4f} {r['p50_ms']:7.2f} {r['p99_ms']:7.2f} "
            f"{r['rss_mib']:7.1f} {100 * r['cpu']:4.1f}% {r['saves']:5d} {r['load1']:5.2f}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--save-every", type=float, default=60.0, help="seconds")
    parser.add_argument("--pace", type=float, default=20.0, help="steps a second")
    parser.add_argument("--kill-at", type=float, default=None,
                        help="seconds in (default: the middle); the kill waits for a save")
    parser.add_argument("--seed", type=int, default=0, help="where in a save the kill lands")
    parser.add_argument("--dir", default=None, help="checkpoints here (default: a temp dir)")
    parser.add_argument("--report-every", type=float, default=5.0)
    parser.add_argument("--sample-every", type=float, default=5.0)
    parser.add_argument("--warmup-minutes", type=float, default=None)
    parser.add_argument("--rss-slope", type=float, default=0.25, help="MiB/min")
    parser.add_argument("--rss-band", type=float, default=8.0, help="MiB")
    parser.add_argument("--p99-slack-ms", type=float, default=3.0)
    parser.add_argument("--json", default=None, help="write the per-minute rows here")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--until", type=float, default=None, help=argparse.SUPPRESS)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.child is not None:
        import asyncio
        asyncio.run(child_main(args))
        return 0
    with tempfile.TemporaryDirectory(prefix="soak_train_", dir=args.dir) as workdir:
        print(f"checkpoints in {workdir}; the children's stderr in {workdir}/child.log",
              flush=True)
        result = run(args.minutes, workdir, args)
        failures = check_resume(result)
        rows = per_minute(result)
        _print_table(rows)
        failures += check_long(result, args.minutes, args)
        if args.json:
            with open(args.json, "w") as file:
                json.dump({"rows": rows, "p99": result.get("p99")}, file, indent=1)
        if failures:
            with open(os.path.join(workdir, "child.log"), errors="replace") as file:
                print("the children's stderr, last lines:\n" + "".join(file.readlines()[-20:]))
    print("verdict: " + ("PASS" if not failures else "FAIL\n  " + "\n  ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
