"""Small jobs shared by the runtime tests (defined per test through factories, so each
test's fresh session gets its own)."""
import signal
import subprocess
import sys
import threading
import time

import numpy as np

import aioflow as flow
import aioflow.typing as tp

X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
Y = np.array([0, 1, 2, 3], np.int32)


def make_train(form=tp.Numpy, lr=0.1):
    def train(x: tp.Numpy.Placeholder((4, 3)),
              y: tp.Numpy.Placeholder((4,), dtype=flow.int32)):
        logits = flow.layers.dense(x, 5, name="fc",
                                   kernel_initializer=flow.constant_initializer(0.1))
        # Through identity: labels computed in the job are range-checked inside the step
        # (on the CPU), which is the step error these tests raise on purpose; labels
        # straight from a placeholder are refused when the job is called instead.
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(flow.identity(y), logits)
        flow.optimizer.SGD(lr, momentum=0).minimize(loss)
        return loss
    train.__annotations__["return"] = form
    return flow.global_function(type="train")(train)


def make_predict(form=tp.Numpy):
    def predict(x: tp.Numpy.Placeholder((4, 3))):
        return flow.layers.dense(x, 5, name="fc",
                                 kernel_initializer=flow.constant_initializer(0.1))
    predict.__annotations__["return"] = form
    return flow.global_function(type="predict")(predict)


def make_slow(seconds: float, form=tp.Numpy):
    """A predict job whose step takes about ``seconds`` of GIL-free compute."""
    n = 512
    repeats = max(1, int(seconds / 0.002))

    def slow(x: tp.Numpy.Placeholder((n, n))):
        y = x
        for _ in range(repeats):
            y = flow.matmul(y, x) * (1.0 / n)
        return y
    slow.__annotations__["return"] = form
    return flow.global_function(type="predict")(slow), np.eye(n, dtype=np.float32)


def ran_on(job) -> list:
    """Names of the threads the job's plan runs on from now on, one a step (compiles the
    job in the default session if needed)."""
    from aioflow.engine.session import default_session
    compiled = job.compiled_for(default_session())
    threads = []
    real = compiled.plan.run

    def recording(ctx, inputs):
        threads.append(threading.current_thread().name)
        return real(ctx, inputs)
    compiled.plan.run = recording
    return threads


def reference_losses(steps: int, lr=0.1):
    """The losses of ``steps`` blocking calls, for comparing other forms against."""
    flow.clear_default_session()
    train = make_train()
    out = [float(train(X, Y).mean()) for _ in range(steps)]
    flow.clear_default_session()
    return out


def interrupt_when_ready(script: str, after: float):
    """Run ``script`` in a fresh interpreter; once it printed "ready", wait ``after``
    seconds and send it SIGINT (Ctrl-C). Returns (returncode, stdout, stderr, seconds it
    took to exit after the signal). The process never outlives a failed test."""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(after)
        proc.send_signal(signal.SIGINT)
        start = time.perf_counter()
        out, err = proc.communicate(timeout=30)
        return proc.returncode, out, err, time.perf_counter() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def refusals_inside_a_callback(register, *calls) -> list:
    """Register a callback (``register(callback)``) that tries each of ``calls`` (blocking
    entry points); after a sync, the messages of the RuntimeErrors they raised."""
    errors = []

    def callback(_):
        for call in calls:
            try:
                call()
            except RuntimeError as exc:
                errors.append(str(exc))
    register(callback)
    flow.sync_default_session()
    return errors
