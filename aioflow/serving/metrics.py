"""What a serving operator watches: counts, queue depth, batch sizes, latency percentiles.

:class:`ServingMetrics` is filled in by :class:`~aioflow.serving.DynamicBatcher` on its
event loop (no locks needed) and read two ways: :meth:`ServingMetrics.snapshot` returns a
plain dict (JSON-serializable), :func:`prometheus_text` renders one or more snapshots in
Prometheus' text exposition format (version 0.0.4).

>>> m = ServingMetrics(max_batch_size=4)
>>> m.record_batch(rows=3, requests=2, seconds=0.010)
>>> m.record_latency(0.012); m.record_latency(0.020)
>>> snap = m.snapshot()
>>> snap["batches"], snap["batch_size_histogram"]
(1, {1: 0, 2: 0, 3: 1, 4: 0})
>>> snap["latency_seconds"]["count"]
2
>>> print(prometheus_text({"mnist": snap}).splitlines()[2])
aioflow_serving_requests_total{model="mnist"} 0
"""
from __future__ import annotations

import collections
import math
import time

import numpy as np

__all__ = ["ServingMetrics", "prometheus_text"]

# How many recent latencies the percentiles are computed over.
WINDOW = 10_000
QUANTILES = (0.5, 0.9, 0.99)


class ServingMetrics:
    """Counters, gauges, a batch-size histogram and windowed latency percentiles.

    Counters only grow. ``queue_depth`` / ``queued_samples`` / ``inflight_batches`` are
    gauges the batcher sets. Percentiles are over the last ``window`` observations.
    """

    COUNTERS = (
        ("requests", "requests accepted into the queue"),
        ("samples", "samples (rows) accepted into the queue"),
        ("succeeded", "requests answered with a result"),
        ("failed", "requests answered with the exception of their batch"),
        ("rejected", "requests refused because the queue was full (OverloadedError)"),
        ("timed_out", "requests whose timeout expired before their result"),
        ("cancelled", "requests cancelled by their caller"),
        ("batches", "job steps run"),
        ("batch_rows", "real (non-padding) rows in those steps"),
        ("padded_rows", "padding rows added to fill short batches"),
    )

    def __init__(self, max_batch_size: int, window: int = WINDOW):
        self.max_batch_size = max_batch_size
        self.queue_depth = 0
        self.queued_samples = 0
        self.inflight_batches = 0
        self._window = window
        self.reset()

    def reset(self) -> None:
        """Counters, histograms and latencies from zero; the live gauges (queue depth,
        batches in flight) stay, since they describe now, not history."""
        window = self._window
        self.started = time.time()
        self.counts = {name: 0 for name, _ in self.COUNTERS}
        self.batch_sizes = [0] * (self.max_batch_size + 1)  # index = real rows in a batch
        self.latency_sum = 0.0
        self.latency_count = 0
        self.batch_seconds_sum = 0.0
        self._latencies: collections.deque[float] = collections.deque(maxlen=window)
        self._batch_seconds: collections.deque[float] = collections.deque(maxlen=window)

    # -- recording (called by the batcher) ---------------------------------------------------
    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] += n

    def record_latency(self, seconds: float) -> None:
        """End-to-end time of one answered request: queued, batched, computed, split."""
        self._latencies.append(seconds)
        self.latency_sum += seconds
        self.latency_count += 1

    def record_batch(self, rows: int, requests: int, seconds: float, padded: int = 0) -> None:
        """One job step over ``rows`` real rows from ``requests`` requests, plus ``padded``
        zero rows."""
        self.counts["batches"] += 1
        self.counts["batch_rows"] += rows
        self.counts["padded_rows"] += padded
        self.batch_sizes[min(rows, self.max_batch_size)] += 1
        self._batch_seconds.append(seconds)
        self.batch_seconds_sum += seconds

    # -- reading ----------------------------------------------------------------------------
    def snapshot(self) -> dict:
        """Everything as a plain, JSON-serializable dict."""
        batches = self.counts["batches"]
        return {
            **self.counts,
            "queue_depth": self.queue_depth,
            "queued_samples": self.queued_samples,
            "inflight_batches": self.inflight_batches,
            "max_batch_size": self.max_batch_size,
            "mean_batch_size": self.counts["batch_rows"] / batches if batches else 0.0,
            "batch_size_histogram": {size: self.batch_sizes[size]
                                     for size in range(1, self.max_batch_size + 1)},
            "latency_seconds": _summary(self._latencies, self.latency_sum,
                                        self.latency_count),
            "batch_seconds": _summary(self._batch_seconds, self.batch_seconds_sum, batches),
            "uptime_seconds": time.time() - self.started,
        }


def _summary(window, total: float, count: int) -> dict:
    """p50/p90/p99 over the window, plus the all-time sum and count."""
    out = {"count": count, "sum": total}
    values = np.fromiter(window, dtype=np.float64, count=len(window))
    for q in QUANTILES:
        key = f"p{round(q * 100)}"
        out[key] = float(np.quantile(values, q)) if values.size else math.nan
    return out


# -- Prometheus text format -------------------------------------------------------------------

def _label(value) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(value) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        return repr(value)
    return str(value)


def prometheus_text(snapshots: dict, prefix: str = "aioflow_serving") -> str:
    """Render ``{model_name: snapshot_dict}`` in Prometheus' text format (0.0.4).

    Counters end in ``_total``; the batch size is a histogram with power-of-two buckets;
    request latency and step duration are summaries with 0.5/0.9/0.99 quantiles.
    """
    lines: list[str] = []

    def family(name, kind, help_text, samples):
        lines.append(f"# HELP {prefix}_{name} {help_text}")
        lines.append(f"# TYPE {prefix}_{name} {kind}")
        for suffix, labels, value in samples:
            text = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
            lines.append(f"{prefix}_{name}{suffix}{{{text}}} {_num(value)}")

    for counter, help_text in ServingMetrics.COUNTERS:
        family(f"{counter}_total", "counter", help_text,
               [("", {"model": m}, s[counter]) for m, s in snapshots.items()])
    for gauge, help_text in (("queue_depth", "requests waiting for a batch"),
                             ("queued_samples", "samples waiting for a batch"),
                             ("inflight_batches", "batches submitted and not finished"),
                             ("max_batch_size", "rows per job step")):
        family(gauge, "gauge", help_text,
               [("", {"model": m}, s[gauge]) for m, s in snapshots.items()])

    samples = []
    for m, s in snapshots.items():
        hist = s["batch_size_histogram"]
        bounds, b = [], 1
        while b < s["max_batch_size"]:
            bounds.append(b)
            b *= 2
        bounds.append(s["max_batch_size"])
        for bound in bounds:
            cumulative = sum(n for size, n in hist.items() if size <= bound)
            samples.append(("_bucket", {"model": m, "le": bound}, cumulative))
        samples.append(("_bucket", {"model": m, "le": "+Inf"}, s["batches"]))
        samples.append(("_sum", {"model": m}, s["batch_rows"]))
        samples.append(("_count", {"model": m}, s["batches"]))
    family("batch_size", "histogram", "real rows per job step", samples)

    for name, key, help_text in (
            ("request_latency_seconds", "latency_seconds",
             "time from enqueue to result, over recent requests"),
            ("batch_duration_seconds", "batch_seconds", "job step time, over recent batches")):
        samples = []
        for m, s in snapshots.items():
            summary = s[key]
            for q in QUANTILES:
                samples.append(("", {"model": m, "quantile": q}, summary[f"p{round(q * 100)}"]))
            samples.append(("_sum", {"model": m}, summary["sum"]))
            samples.append(("_count", {"model": m}, summary["count"]))
        family(name, "summary", help_text, samples)
    return "\n".join(lines) + "\n"
