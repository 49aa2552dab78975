"""What the soaks (soak_serve.py, soak_train.py) measure and how they judge it: a
process's RSS and CPU from /proc, the host's load, percentiles, and the two stability
checks (RSS flat after warm-up, p99 stable)."""
from __future__ import annotations

import os

import numpy as np

TICK = os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    """``VmRSS`` of ``pid`` in MiB (NaN once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds ``pid`` used so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def load_average() -> float:
    """The host's 1-minute load average."""
    with open("/proc/loadavg") as file:
        return float(file.read().split()[0])


def percentiles(seconds) -> tuple[float, float]:
    """(p50, p99) in milliseconds of durations in seconds; NaNs when empty."""
    ms = np.asarray(seconds, float) * 1000
    if not ms.size:
        return float("nan"), float("nan")
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


def rss_flat(samples, warm: float, end: float, slope_limit: float, band_limit: float,
             what: str = "RSS") -> tuple[list[str], str]:
    """``samples``: (minute, MiB). Over those of the last 10 minutes before ``end`` that
    come after ``warm``: the least-squares slope under ``slope_limit`` MiB/min and
    max - min under ``band_limit`` MiB. Returns (failures, a line of figures)."""
    after = [(m, v) for m, v in samples if m >= warm and not np.isnan(v)]
    window = [(m, v) for m, v in after if m >= max(warm, end - 10)]
    if len(window) < 3:
        return [f"{what}: too few samples after the warm-up"], f"{what}: too few samples"
    x, y = np.array(window).T
    slope = float(np.polyfit(x, y, 1)[0])
    band = float(y.max() - y.min())
    line = (f"{what}: {after[0][1]:.1f} MiB at the warm-up's end (minute {after[0][0]:.1f}), "
            f"{after[-1][1]:.1f} MiB at the end (minute {after[-1][0]:.1f}); over minutes "
            f"{x[0]:.1f}-{x[-1]:.1f}: slope {slope:+.3f} MiB/min (limit {slope_limit}), "
            f"max - min {band:.1f} MiB (limit {band_limit})")
    failures = []
    if slope > slope_limit:
        failures.append(f"{what} grows {slope:.3f} MiB/min after the warm-up")
    if band > band_limit:
        failures.append(f"{what} moved by {band:.1f} MiB after the warm-up")
    return failures, line


def p99_stable(samples, warm: float, end: float, ratio: float, slack_ms: float,
               what: str) -> tuple[list[str], str, dict]:
    """``samples``: (minute, seconds). The p99 of the last third of the minutes after
    ``warm`` within ``ratio`` times that of the first third, or ``slack_ms`` above it,
    whichever is more. Returns (failures, a line of figures, the figures)."""
    span = end - warm
    first = [s for m, s in samples if warm <= m < warm + span / 3]
    last = [s for m, s in samples if m >= end - span / 3]
    (p50a, p99a), (p50b, p99b) = percentiles(first), percentiles(last)
    limit = max(ratio * p99a, p99a + slack_ms)
    line = (f"{what}: first third (minutes {warm:.1f}-{warm + span / 3:.1f}) p50 {p50a:.1f} / "
            f"p99 {p99a:.1f} ms, last third (minutes {end - span / 3:.1f}-{end:.1f}) p50 "
            f"{p50b:.1f} / p99 {p99b:.1f} ms (limit {limit:.1f} ms)")
    figures = {"first_p50_ms": p50a, "first_p99_ms": p99a, "last_p50_ms": p50b,
               "last_p99_ms": p99b, "limit_ms": limit}
    if not first or not last:
        return [f"{what}: no samples in the first or the last third"], line, figures
    if p99b > limit:
        return [f"{what}: p99 drifted from {p99a:.1f} ms (first third) to {p99b:.1f} ms "
                "(last third)"], line, figures
    return [], line, figures
