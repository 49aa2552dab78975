"""Training that shows itself: a progress bar with rate and ETA, CSV logs, PNG curves.

It lives in the package (not in ``examples/``) so that scripts written from the examples
work wherever aioflow is installed. Optional extras only: ``tqdm`` draws the bar when it
is installed and the output is a terminal; otherwise plain lines, about ten per epoch.
``matplotlib`` (``pip install "aioflow[plot]"``) is needed by :func:`plot` alone.

:class:`TrainingLog` writes ``steps.csv`` (``step, epoch, loss, seconds``) and
``epochs.csv`` (``epoch, accuracy, seconds``) into ``log_dir`` as training goes, and
shows progress on ``stream`` (default ``sys.stderr``, so standard output keeps only what
the script itself prints):

>>> import io, tempfile
>>> from aioflow.progress import TrainingLog
>>> d = tempfile.mkdtemp()
>>> out = io.StringIO()
>>> with TrainingLog(steps_per_epoch=4, epochs=1, log_dir=d, stream=out) as log:
...     for loss in (2.0, 1.5, 1.0, 0.5):
...         log.step(loss)
...     log.epoch_end(accuracy=0.75)
>>> from pathlib import Path
>>> Path(d, "steps.csv").read_text().splitlines()[:2]   # doctest: +ELLIPSIS
['step,epoch,loss,seconds', '1,0,2.0,...']
>>> Path(d, "epochs.csv").read_text().splitlines()[1].startswith("0,0.75,")
True
>>> "epoch 1/1" in out.getvalue() and "steps/s" in out.getvalue()
True
"""
from __future__ import annotations

import csv
import math
import os
import sys
import time

__all__ = ["TrainingLog", "plot"]

_ESTIMATE_AFTER = 5   # steps timed before the plain lines announce the expected duration


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class TrainingLog:
    """Progress (tqdm bar or plain lines) plus per-step and per-epoch CSV files.

    ``steps_per_epoch`` and ``epochs`` (positive ints) give the total for the ETA;
    ``log_dir`` (None: no files) is created; ``tqdm``: None uses it when installed and
    ``stream`` is a terminal, False never, True requires it.
    """

    def __init__(self, steps_per_epoch: int, epochs: int = 1, log_dir=None, stream=None,
                 tqdm=None):
        for name, value in (("steps_per_epoch", steps_per_epoch), ("epochs", epochs)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TrainingLog: {name} must be a positive int, got {value!r}")
        self.steps_per_epoch, self.epochs = steps_per_epoch, epochs
        self.total = steps_per_epoch * epochs
        self.stream = sys.stderr if stream is None else stream
        self.done = 0
        self.epoch = 0
        self.last_loss = float("nan")
        self.start = time.perf_counter()
        self._bar = self._make_bar(tqdm)
        self._plain_every = max(1, steps_per_epoch // 10)
        self._files = []
        self._steps = self._epochs = None
        if log_dir is not None:
            os.makedirs(log_dir, exist_ok=True)
            self.log_dir = os.fspath(log_dir)
            self._steps = self._open("steps.csv", ["step", "epoch", "loss", "seconds"])
            self._epochs = self._open("epochs.csv", ["epoch", "accuracy", "seconds"])

    def _make_bar(self, want):
        if want is False:
            return None
        try:
            from tqdm import tqdm
        except ImportError:
            if want:
                raise ImportError("TrainingLog(tqdm=True) needs tqdm: pip install tqdm") from None
            return None
        if want is None and not (hasattr(self.stream, "isatty") and self.stream.isatty()):
            return None
        return tqdm(total=self.total, file=self.stream, unit="step", dynamic_ncols=True)

    def _open(self, name, header):
        f = open(os.path.join(self.log_dir, name), "w", newline="")
        self._files.append(f)
        writer = csv.writer(f)
        writer.writerow(header)
        return writer

    def step(self, loss=None) -> None:
        """One training step done; ``loss`` (a number or array: its mean) is logged."""
        self.done += 1
        if loss is not None:
            self.last_loss = float(getattr(loss, "mean", lambda: loss)())
        elapsed = time.perf_counter() - self.start
        if self._steps is not None:
            self._steps.writerow([self.done, self.epoch, repr(self.last_loss), f"{elapsed:.3f}"])
        if self._bar is not None:
            self._bar.set_postfix(epoch=f"{self.epoch + 1}/{self.epochs}",
                                  loss=f"{self.last_loss:.4f}", refresh=False)
            self._bar.update(1)
        else:
            self._plain_line(elapsed)

    def _plain_line(self, elapsed: float) -> None:
        rate = self.done / elapsed if elapsed > 0 else float("inf")
        if self.done == _ESTIMATE_AFTER < self.total:
            # A long run says early how long it will take, before the first progress line
            # (a tenth of an epoch may be a minute away).
            print(f"expected duration: about {_clock(self.total / rate)} for {self.total} "
                  f"steps ({rate:.1f} steps/s over the first {self.done})",
                  file=self.stream, flush=True)
        if self.done % self._plain_every == 0 or self.done == self.total:
            eta = (self.total - self.done) / rate if rate > 0 else float("nan")
            in_epoch = self.done - self.epoch * self.steps_per_epoch
            print(f"epoch {self.epoch + 1}/{self.epochs}  step {in_epoch}/{self.steps_per_epoch}"
                  f"  loss {self.last_loss:.4f}  {rate:.1f} steps/s  ETA {_clock(eta)}",
                  file=self.stream, flush=True)

    def write(self, line: str, file=None) -> None:
        """Print ``line`` (default to ``sys.stdout``) without breaking the progress display:
        above the bar when one is drawn (``tqdm.write``), else as a plain line. A script's
        own results go through here, so a terminal shows one display, not two interleaved.

        >>> import io
        >>> out = io.StringIO()
        >>> with TrainingLog(steps_per_epoch=2, stream=io.StringIO()) as log:
        ...     log.write("epoch 1/1  test accuracy 90.0%", file=out)
        >>> out.getvalue().splitlines()
        ['epoch 1/1  test accuracy 90.0%']
        """
        file = sys.stdout if file is None else file
        if self._bar is not None:
            self._bar.write(line, file=file)
        else:
            print(line, file=file, flush=True)

    def epoch_end(self, accuracy=None) -> None:
        """Close an epoch, logging its test ``accuracy`` (a fraction) if given."""
        if self._epochs is not None:
            self._epochs.writerow([self.epoch, "" if accuracy is None else repr(float(accuracy)),
                                   f"{time.perf_counter() - self.start:.3f}"])
            for f in self._files:
                f.flush()
        self.epoch += 1

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        for f in self._files:
            f.close()
        self._files = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def plot(log_dir, png_path) -> str:
    """Draw ``log_dir``'s loss per step and accuracy per epoch into ``png_path``."""
    try:
        import matplotlib
        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError('plotting needs matplotlib: pip install "aioflow[plot]"') from None
    with open(os.path.join(log_dir, "steps.csv"), newline="") as f:
        steps = list(csv.DictReader(f))
    with open(os.path.join(log_dir, "epochs.csv"), newline="") as f:
        epochs = [r for r in csv.DictReader(f) if r["accuracy"]]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot([int(r["step"]) for r in steps], [float(r["loss"]) for r in steps])
    left.set(xlabel="step", ylabel="loss", title="training loss")
    right.plot([int(r["epoch"]) + 1 for r in epochs],
               [100 * float(r["accuracy"]) for r in epochs], marker="o")
    right.set(xlabel="epoch", ylabel="accuracy (%)", title="test accuracy")
    fig.tight_layout()
    fig.savefig(png_path)
    plt.close(fig)
    return os.fspath(png_path)
