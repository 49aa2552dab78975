"""Serve the quickstart's digit classifier over HTTP, with dynamic batching.

    python examples/quickstart.py                       # trains, saves ./quickstart_model
    python examples/serve_mnist.py --checkpoint ./quickstart_model --port 8000
    curl -s localhost:8000/v1/models/mnist:predict -H 'Content-Type: application/json' \
         -d '{"instances": [[0.0, ...784 values]]}'

An ASGI app (Starlette; run by uvicorn) speaking TensorFlow Serving's REST convention:

* ``POST /v1/models/mnist:predict`` with ``{"instances": [...]}``, each instance 784
  numbers or 28 lists of 28 numbers in [0, 1] (white digit on black, like MNIST) →
  ``{"predictions": [[10 probabilities], ...]}``;
* ``POST /v1/models/mnist:classify-png`` with a PNG file, as the raw body or as the file
  field of a multipart form → ``{"predictions": [[10 probabilities]], "classes": [digit]}``;
  any size up to the pixel limit, grayscale or colour, dark-on-light or light-on-dark (it
  is scaled to 28x28, and inverted when its background is light). The predict route
  answers such uploads the same way;
* ``GET /``: a page where one draws a digit and sees the ten probabilities as bars
  (``serve_mnist_page.html``, self-contained);
* ``GET /healthz`` (200 while serving, 503 while starting or draining) and ``GET /metrics``
  (Prometheus text: the batcher's queue, batch sizes, latencies, and HTTP responses).

Concurrent requests are coalesced by :class:`aioflow.serving.DynamicBatcher` into steps of a
predict job with a batch of ``--batch-size`` images. ``--no-batching`` serves one request
per step instead, of a batch-1 job, or with ``--pad`` of the ``--batch-size`` job padded
with zeros (what calling the job once per request does): the baselines of
``benchmarks/serve_load.py``.

The job is compiled and the checkpoint loaded at startup (the ASGI lifespan), not at the
first request. Limits: ``--max-body-bytes`` per request, ``--max-instances`` per request,
``--max-image-pixels`` per PNG (checked from the PNG header before any decoding, and set
as Pillow's ``Image.MAX_IMAGE_PIXELS``). Bodies are parsed as JSON or PNG only (no pickle
anywhere); malformed input gets a 4xx JSON ``{"error": "..."}`` and the server keeps going.
A full queue answers 503 with ``Retry-After``, a request slower than ``--timeout`` 504.

The event loop never runs work a client can make long: bodies must arrive within
``--body-timeout`` (408) and request heads within ``--header-timeout`` (closed);
multipart forms, PNG chunk structure and JSON container counts are checked by bounded
linear scans, and PNG decoding and large JSON parsing run on a small thread pool with a
deadline (``--parse-timeout``: 504). A client that disconnects is logged in one INFO line.

A burst is served up to capacity and only the excess refused: ``--max-inflight`` requests
are served at once and ``--max-waiting`` more wait for a slot (beyond, or after
``--queue-timeout``: 503 with ``Retry-After``, at once); of ``--max-connections`` open
sockets, the one that has waited longest for a request head (idle, or trickling it) is
closed to make room for a new one. See docs/serving.md.

``app`` (module level) is configured from environment variables for ``uvicorn
serve_mnist:app``: ``AIOFLOW_MNIST_CHECKPOINT``, ``AIOFLOW_MNIST_MODEL``,
``AIOFLOW_MNIST_BATCHING`` (0/1), ``AIOFLOW_MNIST_BATCH_SIZE``.
"""
import argparse
import asyncio
import contextlib
import dataclasses
import importlib.util
import io
import json
import logging
import os
import sys
import time

import numpy as np
from PIL import Image
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

import aioflow as flow
import aioflow.typing as tp
from aioflow.serving import DynamicBatcher, ServingError
from aioflow.serving.admission import Admission, AdmissionLimit
from aioflow.serving.bodies import (PNG_SIGNATURE, BodyError, ClientDisconnected, check_png,
                                    multipart_file, read_body)
from aioflow.serving.offload import ParseBusyError, ParsePool, ParseTimeoutError

try:  # ~9x faster than json on 784 floats: 18 us against 175 us per instance
    import orjson
except ImportError:  # the stdlib parser alone gives the same answers, slower
    orjson = None

log = logging.getLogger("serve_mnist")

MODEL_NAME = "mnist"
PREDICT_PATH = f"/v1/models/{MODEL_NAME}:predict"
PNG_PATH = f"/v1/models/{MODEL_NAME}:classify-png"
PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve_mnist_page.html")


def _quickstart():
    """examples/quickstart.py, loaded by path: its lenet/mlp built the checkpoint."""
    name = "aioflow_examples_quickstart"
    if name not in sys.modules:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "quickstart.py")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


@dataclasses.dataclass
class ServerConfig:
    checkpoint: str = "./quickstart_model"
    model: str = "lenet"                # "lenet" or "mlp", as quickstart.py --model
    batching: bool = True
    pad: bool = False                   # batching off: one request per step of the full,
                                        # zero-padded job instead of a batch-1 job
    batch_size: int = 64                # rows per job step (batching on)
    max_wait: float = 0.005             # seconds a batch waits for stragglers
    max_inflight_batches: int = 1       # batches submitted at once (batching on)
    max_queue: int = 1024               # samples waiting; beyond: 503
    timeout: float = 30.0               # seconds per request; beyond: 504
    max_body_bytes: int = 4 << 20       # 64 instances of 784 long floats fit
    max_instances: int = 64
    max_image_pixels: int = 1 << 20     # width * height of an uploaded PNG
    max_png_chunks: int = 1024          # an encoder writes a handful
    max_form_parts: int = 16            # parts of a multipart upload
    body_timeout: float = 15.0          # seconds for a whole body to arrive; beyond: 408
    parse_timeout: float = 10.0         # seconds to parse/decode a body; beyond: 504
    parse_threads: int = 2              # threads that parse large bodies and decode PNGs
    parse_queue: int = 64               # parses waiting for a thread; beyond: 503
    inline_parse_bytes: int = 64 << 10  # JSON bodies up to this are parsed on the loop
    # requests: served at once, waiting for a slot; beyond either: 503 with Retry-After
    max_inflight: int = 256             # requests being served (bodies held, parsed, ...)
    max_waiting: int = 2048             # requests waiting for a slot, first come first served
    queue_timeout: float = 10.0         # seconds a request may wait for a slot
    # uvicorn (run by main() only): connection-level limits
    max_connections: int = 4096         # open sockets; beyond: the longest idle one closed
    connection_grace: float = 1.0       # ... if idle this long, else the new one gets 503
    header_timeout: float = 10.0        # seconds for a request's head; beyond: closed
    timeout_keep_alive: float = 5.0     # seconds an idle keep-alive connection stays
    backlog: int = 2048                 # connections the kernel queues before accept()
    limit_concurrency: int = 0          # uvicorn's own cap (0: off; see docs/serving.md)

    @classmethod
    def from_env(cls):
        env = os.environ.get
        default = cls()
        return cls(checkpoint=env("AIOFLOW_MNIST_CHECKPOINT", default.checkpoint),
                   model=env("AIOFLOW_MNIST_MODEL", default.model),
                   batching=env("AIOFLOW_MNIST_BATCHING", "1") not in ("0", "false", "no"),
                   batch_size=int(env("AIOFLOW_MNIST_BATCH_SIZE", default.batch_size)))


# A request the server refuses: answered as ``{"error": message}`` with ``status``.
ApiError = BodyError


# -- the model ---------------------------------------------------------------------------------

def make_predict_job(model: str, batch_size: int):
    """A predict job: images (batch, 1, 28, 28) in [0, 1] -> softmax probabilities."""
    if model not in ("lenet", "mlp"):
        raise ValueError(f"model must be 'lenet' or 'mlp', got {model!r}")
    net = getattr(_quickstart(), model)

    @flow.global_function(type="predict")
    def mnist_predict(
        images: tp.Numpy.Placeholder((batch_size, 1, 28, 28), dtype=flow.float),
    ) -> tp.Numpy:
        return flow.nn.softmax(net(images, train=False))

    return mnist_predict


async def load_model(config: ServerConfig) -> DynamicBatcher:
    """Define the job, load the checkpoint, compile, warm up: ready to serve."""
    path = os.path.abspath(config.checkpoint)
    if not os.path.isdir(path):
        raise RuntimeError(f"checkpoint directory {path} does not exist; run "
                           "`python examples/quickstart.py` first (it saves "
                           "./quickstart_model) or pass --checkpoint DIR")
    if config.batching:
        job = make_predict_job(config.model, config.batch_size)
        model = DynamicBatcher(job, max_wait=config.max_wait, max_queue=config.max_queue,
                               timeout=config.timeout, name=MODEL_NAME,
                               max_inflight_batches=config.max_inflight_batches)
    else:  # the baselines: one request, one step (two steps in flight)
        job = make_predict_job(config.model, config.batch_size if config.pad else 1)
        model = DynamicBatcher(job, max_batch_size=1, max_wait=0, max_queue=config.max_queue,
                               timeout=config.timeout, max_inflight_batches=2,
                               name=MODEL_NAME)
    try:
        await flow.train.CheckPoint().load(path)  # compiles the job first
    except Exception as exc:
        raise RuntimeError(f"cannot load {path} into the {config.model} model (was it saved "
                           f"by `quickstart.py --model {config.model}`?): {exc}") from exc
    await model.start()
    await model(np.zeros((1, 28, 28), np.float32))  # warm-up: first-step costs paid here
    model.reset_metrics()   # the warm-up is no client's request: /metrics starts at zero
    return model


# -- request parsing ---------------------------------------------------------------------------

class _NonFinite(ValueError):
    pass


def _refuse_constant(name: str):
    raise _NonFinite(name)


def check_json_size(body: bytes, max_instances: int) -> None:
    """Refuse, before parsing, a body with far more lists, objects or values than
    ``max_instances`` images hold: parsers build every container (3.9 MB of ``[],``
    is 1.3 million lists, 0.4 s of a parser holding the GIL, whatever thread runs it) and
    nest as deep as the body says. Counting bytes runs at memory speed. A valid request
    has at most 1 + 29 lists, 812 separators and 1 object per instance; twice that is
    allowed (brackets or commas inside strings count too), so a request only a little
    over the limit still gets :func:`_images`' precise message."""
    lists, objects = body.count(b"["), body.count(b"{")
    if lists > 2 * 30 * max_instances + 8 or objects > 8:
        raise ApiError(400, f"request body is not valid: {lists} lists and {objects} objects "
                            f"are far more than {max_instances} instances need (deeply nested "
                            f"JSON, or not images)")
    values = body.count(b",")
    if values > 2 * 812 * max_instances + 64:
        raise ApiError(413, f"request body holds {values} values, far more than the limit "
                            f"of {max_instances} instances of 784 numbers")


def parse_instances(body: bytes, max_instances: int) -> np.ndarray:
    """``{"instances": [...]}`` -> float32 images (n, 1, 28, 28); ApiError if malformed."""
    check_json_size(body, max_instances)
    if orjson is not None:
        try:
            return _images(orjson.loads(body), max_instances)
        except orjson.JSONDecodeError:
            pass  # the stdlib parser below says precisely what is wrong (NaN, position)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, f"request body is not valid JSON: not UTF-8 ({exc.reason} at byte "
                            f"{exc.start})") from None
    try:
        document = json.loads(text, parse_constant=_refuse_constant)
    except _NonFinite as exc:
        raise ApiError(400, f"{exc} is not allowed: pixel values must be finite numbers "
                            "in [0, 1]") from None
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, f"request body is not valid JSON ({exc})") from None
    return _images(document, max_instances)


def _images(document, max_instances: int) -> np.ndarray:
    if not isinstance(document, dict) or "instances" not in document:
        raise ApiError(400, 'expected a JSON object {"instances": [...]} (TensorFlow '
                            "Serving's row format)")
    instances = document["instances"]
    if not isinstance(instances, list) or not instances:
        raise ApiError(400, '"instances" must be a non-empty list of images')
    if len(instances) > max_instances:
        raise ApiError(413, f"{len(instances)} instances in one request; the limit is "
                            f"{max_instances}")
    images = np.empty((len(instances), 784), np.float32)
    for i, instance in enumerate(instances):
        images[i] = _instance(instance, i)
    return images.reshape(-1, 1, 28, 28)


def _instance(instance, i: int) -> np.ndarray:
    expected = "784 numbers or 28 lists of 28 numbers"
    if not isinstance(instance, list):
        raise ApiError(400, f"instance {i}: expected {expected}, got {type(instance).__name__}")
    try:
        array = np.asarray(instance)
    except (ValueError, TypeError):  # ragged nesting
        array = None
    if array is None or array.shape not in ((784,), (28, 28)):
        shape = "ragged lists" if array is None else f"shape {list(array.shape)}"
        raise ApiError(400, f"instance {i}: expected {expected}, got {shape}")
    if array.dtype.kind not in "iuf":
        array = _big_integers(array, i)
    if array.dtype.kind not in "iuf":
        raise ApiError(400, f"instance {i}: every value must be a number, got "
                            f"{_kind_name(array)}")
    array = array.astype(np.float64).reshape(784)
    if not np.isfinite(array).all():
        raise ApiError(400, f"instance {i}: values must be finite (got a number out of "
                            "float32's range)")
    low, high = array.min(), array.max()
    if low < 0.0 or high > 1.0:
        raise ApiError(400, f"instance {i}: values must lie in [0, 1], got values from {low:g} "
                            f"to {high:g} (scale 0..255 pixels by 1/255)")
    return array


def _big_integers(array: np.ndarray, i: int) -> np.ndarray:
    """An object array of numbers only, as float64; anything else unchanged. The stdlib
    parser reads integers beyond int64 (``10**39``, ``1`` and 400 zeros) as Python ints,
    and numpy then keeps the whole list as objects: numbers out of range, not non-numeric
    values."""
    if array.dtype != object:
        return array
    values = array.reshape(-1).tolist()
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return array
    try:
        return np.array(values, np.float64).reshape(array.shape)
    except OverflowError:   # beyond float64 too
        raise ApiError(400, f"instance {i}: a number out of float32's range (an integer "
                            "too large for any float); values must lie in [0, 1]") from None


def _kind_name(array: np.ndarray) -> str:
    return {"b": "booleans", "U": "strings", "S": "strings"}.get(array.dtype.kind,
                                                                 "non-numeric values")


JSON_TYPES = ("application/json",)


def require_json(content_type: str) -> None:
    """415 unless the request says its body is JSON (``application/json`` or a ``+json``
    type): a body sent as ``text/plain`` or with no type at all is refused, as every other
    type is, rather than guessed at (a browser form can post ``text/plain`` across sites
    without asking)."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind in JSON_TYPES or kind.endswith("+json"):
        return
    got = f"Content-Type {kind!r}" if kind else "no Content-Type"
    raise ApiError(415, f"the body must be JSON sent as Content-Type: application/json (got "
                        f"{got}), or a PNG image")


def is_image_upload(content_type: str, body: bytes) -> bool:
    """A PNG sent as the body, or a multipart form (e.g. ``curl -F file=@digit.png``)."""
    kind = content_type.split(";", 1)[0].strip().lower()
    return (kind.startswith("image/") or kind == "multipart/form-data"
            or body.startswith(PNG_SIGNATURE))


def uploaded_png(content_type: str, body: bytes, max_parts: int = 16) -> bytes:
    """The PNG of an upload: the body itself, or the first file part of a multipart form
    that holds a PNG (a bounded, linear parser: :func:`aioflow.serving.bodies.multipart_file`)."""
    if content_type.split(";", 1)[0].strip().lower() != "multipart/form-data":
        return body
    png = multipart_file(content_type, body, PNG_SIGNATURE, max_parts)
    if png is None:
        raise ApiError(415, "the form holds no PNG file (send one file field with a PNG "
                            "image, e.g. curl -F file=@digit.png)")
    return png


def decode_png(body: bytes, max_pixels: int, max_chunks: int = 1024) -> np.ndarray:
    """A PNG -> (28, 28) float32 in [0, 1], light digit on dark as in MNIST.

    The file's structure (every chunk's CRC, IEND present, a bounded number of chunks) and
    its pixel count are checked before Pillow decodes anything (a small file can declare
    a huge image: a decompression bomb; Pillow does not check image data CRCs, and accepts
    truncated files when ``ImageFile.LOAD_TRUNCATED_IMAGES`` is set); Pillow is
    restricted to PNG. Slow: run it off the event loop (the server's parse pool).
    """
    check_png(body, max_pixels, max_chunks)
    try:
        with Image.open(io.BytesIO(body), formats=["PNG"]) as image:
            if image.width * image.height > max_pixels:  # the header said otherwise
                raise ApiError(413, "image is over the pixel limit")
            image.load()
            if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
                background = Image.new("RGBA", image.size, (255, 255, 255, 255))
                image = Image.alpha_composite(background, image.convert("RGBA"))
            gray = image.convert("L").resize((28, 28), Image.Resampling.BILINEAR)
    except ApiError:
        raise
    except Image.DecompressionBombError as exc:
        raise ApiError(413, f"image refused: {exc}") from None
    except Exception as exc:  # whatever a malformed file makes the decoder raise
        raise ApiError(400, f"could not decode the PNG: {exc}") from None
    pixels = np.asarray(gray, np.float32) / 255.0
    if pixels.mean() > 0.5:  # a dark digit on a light background
        pixels = 1.0 - pixels
    return pixels


# -- the app -----------------------------------------------------------------------------------

def create_app(config=None) -> Starlette:
    """The ASGI app; loading happens in its lifespan (startup), serving in its routes."""
    config = config or ServerConfig.from_env()
    if Image.MAX_IMAGE_PIXELS is None or Image.MAX_IMAGE_PIXELS > config.max_image_pixels:
        Image.MAX_IMAGE_PIXELS = config.max_image_pixels  # Pillow's own bomb check too
    http_counts = {}  # (route, status) -> responses

    def count(route: str, status: int) -> None:
        http_counts[route, status] = http_counts.get((route, status), 0) + 1

    def error(route: str, status: int, message: str, headers=None) -> JSONResponse:
        count(route, status)
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    async def run_model(request: Request, images: np.ndarray) -> np.ndarray:
        model: DynamicBatcher = request.app.state.model
        step = model.max_batch_size
        parts = await asyncio.gather(*(model(images[i:i + step])
                                       for i in range(0, len(images), step)))
        return np.concatenate(parts)

    async def answer(route: str, request: Request, work) -> Response:
        try:
            payload = await work()
        except ApiError as exc:
            # refused while its body was still arriving: the rest may be on its way, so
            # this connection cannot carry another request and the answer closes it
            closing = {"Connection": "close"} if getattr(exc, "while_reading", False) else None
            return error(route, exc.status, exc.message, closing)
        except ClientDisconnected as exc:
            # nobody to answer: one line, no traceback (counted as nginx's 499)
            client = request.client
            log.info("serve_mnist: client %s disconnected on %s after %d bytes of its body",
                     f"{client.host}:{client.port}" if client else "?", route, exc.received)
            count(route, 499)
            return Response(status_code=499)
        except (ServingError, ParseBusyError, ParseTimeoutError) as exc:
            headers = {"Retry-After": "1"} if exc.status_code == 503 else None
            return error(route, exc.status_code, str(exc), headers)
        except Exception:
            log.exception("serve_mnist: internal error on %s", route)
            return error(route, 500, "internal error (logged on the server)")
        count(route, 200)
        return JSONResponse(payload)

    async def body_of(request: Request) -> bytes:
        try:
            return await read_body(request.receive, request.headers, config.max_body_bytes,
                                   config.body_timeout)
        except BodyError as exc:
            exc.while_reading = True
            raise

    def png_pixels(content_type: str, body: bytes) -> np.ndarray:
        png = uploaded_png(content_type, body, config.max_form_parts)
        return decode_png(png, config.max_image_pixels, config.max_png_chunks)

    async def classify(request: Request, body: bytes) -> dict:
        # multipart parsing and PNG decoding cost what the client chooses: off the loop
        pixels = await request.app.state.parse_pool.run(
            png_pixels, request.headers.get("content-type", ""), body)
        probabilities = await run_model(request, pixels.reshape(1, 1, 28, 28))
        return {"predictions": probabilities.tolist(),
                "classes": probabilities.argmax(axis=1).tolist()}

    async def instances(request: Request, body: bytes) -> np.ndarray:
        if len(body) <= config.inline_parse_bytes:  # a few instances: cheaper than a thread
            return parse_instances(body, config.max_instances)
        return await request.app.state.parse_pool.run(parse_instances, body,
                                                      config.max_instances)

    async def predict(request: Request) -> Response:
        async def work():
            body = await body_of(request)
            content_type = request.headers.get("content-type", "")
            if is_image_upload(content_type, body):
                return await classify(request, body)
            require_json(content_type)
            probabilities = await run_model(request, await instances(request, body))
            return {"predictions": probabilities.tolist()}
        return await answer("predict", request, work)

    async def classify_png(request: Request) -> Response:
        async def work():
            return await classify(request, await body_of(request))
        return await answer("classify-png", request, work)

    async def page(request: Request) -> HTMLResponse:
        count("page", 200)
        return HTMLResponse(page_html)

    async def healthz(request: Request) -> JSONResponse:
        model = getattr(request.app.state, "model", None)
        ready = model is not None and model.accepting
        count("healthz", 200 if ready else 503)
        return JSONResponse({"status": "ok" if ready else "unavailable",
                             "model": config.model, "batching": config.batching},
                            status_code=200 if ready else 503)

    async def metrics(request: Request) -> Response:
        count("metrics", 200)
        model = getattr(request.app.state, "model", None)
        text = model.prometheus() if model is not None else ""
        lines = ["# HELP serve_mnist_http_responses_total HTTP responses by route and status",
                 "# TYPE serve_mnist_http_responses_total counter"]
        for (route, status), n in sorted(http_counts.items()):
            lines.append(f'serve_mnist_http_responses_total{{route="{route}",'
                         f'status="{status}"}} {n}')
        text += request.app.state.admission.prometheus("serve_mnist_admission")
        return Response(text + "\n".join(lines) + "\n",
                        media_type="text/plain; version=0.0.4; charset=utf-8")

    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return error("other", exc.status_code, exc.detail, getattr(exc, "headers", None))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        started = time.perf_counter()
        app.state.model = await load_model(config)
        app.state.parse_pool = ParsePool(config.parse_threads, config.parse_queue,
                                         config.parse_timeout, name="serve_mnist-parse")
        log.info("serve_mnist: %s model loaded from %s in %.2f s (batching %s)",
                 config.model, os.path.abspath(config.checkpoint),
                 time.perf_counter() - started, "on" if config.batching else "off")
        try:
            yield
        finally:
            await app.state.model.close(timeout=config.timeout)  # drain queued requests
            app.state.parse_pool.close()

    with open(PAGE, encoding="utf-8") as file:  # the drawing page, self-contained
        page_html = file.read()
    routes = [Route("/", page, methods=["GET"]),
              Route(PREDICT_PATH, predict, methods=["POST"]),
              Route(PNG_PATH, classify_png, methods=["POST"]),
              Route("/healthz", healthz, methods=["GET"]),
              Route("/metrics", metrics, methods=["GET"])]
    # requests in flight and waiting are bounded here (connections by main()'s protocol)
    admission = Admission(config.max_inflight, config.max_waiting, config.queue_timeout)
    app = Starlette(routes=routes, lifespan=lifespan,
                    exception_handlers={HTTPException: http_error},
                    middleware=[Middleware(AdmissionLimit, admission=admission)])
    app.state.config = config
    app.state.admission = admission
    app.state.model = None
    return app


app = create_app()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = ServerConfig()
    parser.add_argument("--checkpoint", default=default.checkpoint,
                        help="directory saved by examples/quickstart.py (default: %(default)s)")
    parser.add_argument("--model", choices=("lenet", "mlp"), default=default.model,
                        help="the model the checkpoint was trained as (quickstart's --model)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--no-batching", action="store_true",
                        help="one request per step of a batch-1 job (baseline)")
    parser.add_argument("--pad", action="store_true",
                        help="with --no-batching: one request per step of the --batch-size "
                             "job, zero-padded (baseline)")
    parser.add_argument("--batch-size", type=int, default=default.batch_size)
    parser.add_argument("--max-wait-ms", type=float, default=default.max_wait * 1000)
    parser.add_argument("--max-inflight-batches", type=int,
                        default=default.max_inflight_batches)
    parser.add_argument("--max-queue", type=int, default=default.max_queue)
    parser.add_argument("--timeout", type=float, default=default.timeout)
    parser.add_argument("--max-body-bytes", type=int, default=default.max_body_bytes)
    parser.add_argument("--max-instances", type=int, default=default.max_instances)
    parser.add_argument("--max-image-pixels", type=int, default=default.max_image_pixels)
    parser.add_argument("--max-png-chunks", type=int, default=default.max_png_chunks)
    parser.add_argument("--max-form-parts", type=int, default=default.max_form_parts)
    parser.add_argument("--body-timeout", type=float, default=default.body_timeout,
                        help="seconds for a request body to arrive (else 408)")
    parser.add_argument("--parse-timeout", type=float, default=default.parse_timeout,
                        help="seconds to parse a body or decode a PNG (else 504)")
    parser.add_argument("--parse-threads", type=int, default=default.parse_threads)
    parser.add_argument("--parse-queue", type=int, default=default.parse_queue,
                        help="parses waiting for a thread (beyond: 503)")
    parser.add_argument("--inline-parse-bytes", type=int, default=default.inline_parse_bytes,
                        help="JSON bodies up to this size are parsed on the event loop")
    parser.add_argument("--max-inflight", type=int, default=default.max_inflight,
                        help="requests served at once (more wait for a slot)")
    parser.add_argument("--max-waiting", type=int, default=default.max_waiting,
                        help="requests waiting for a slot (beyond: 503 with Retry-After)")
    parser.add_argument("--queue-timeout", type=float, default=default.queue_timeout,
                        help="seconds a request may wait for a slot (else 503)")
    parser.add_argument("--max-connections", type=int, default=default.max_connections,
                        help="open connections; beyond, the one idle longest (at least "
                             "--connection-grace s) is closed, or the new one gets 503")
    parser.add_argument("--connection-grace", type=float, default=default.connection_grace,
                        help="seconds a connection may wait for its request head before "
                             "it can be closed to make room")
    parser.add_argument("--backlog", type=int, default=default.backlog,
                        help="connections the kernel queues before they are accepted")
    parser.add_argument("--limit-concurrency", type=int, default=default.limit_concurrency,
                        help="uvicorn's own cap on connections + requests, 503 to every "
                             "request beyond it (default 0: off; --max-connections and "
                             "--max-inflight replace it)")
    parser.add_argument("--header-timeout", type=float, default=default.header_timeout,
                        help="seconds for a request's line and headers (else closed)")
    parser.add_argument("--timeout-keep-alive", type=float,
                        default=default.timeout_keep_alive)
    parser.add_argument("--no-access-log", action="store_true")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    config = ServerConfig(checkpoint=args.checkpoint, model=args.model,
                          batching=not args.no_batching, pad=args.pad,
                          batch_size=args.batch_size,
                          max_wait=args.max_wait_ms / 1000, max_queue=args.max_queue,
                          max_inflight_batches=args.max_inflight_batches,
                          timeout=args.timeout, max_body_bytes=args.max_body_bytes,
                          max_instances=args.max_instances,
                          max_image_pixels=args.max_image_pixels,
                          max_png_chunks=args.max_png_chunks,
                          max_form_parts=args.max_form_parts,
                          body_timeout=args.body_timeout, parse_timeout=args.parse_timeout,
                          parse_threads=args.parse_threads, parse_queue=args.parse_queue,
                          inline_parse_bytes=args.inline_parse_bytes,
                          max_inflight=args.max_inflight, max_waiting=args.max_waiting,
                          queue_timeout=args.queue_timeout,
                          max_connections=args.max_connections,
                          connection_grace=args.connection_grace, backlog=args.backlog,
                          limit_concurrency=args.limit_concurrency,
                          header_timeout=args.header_timeout,
                          timeout_keep_alive=args.timeout_keep_alive)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s: %(message)s")
    import uvicorn
    from aioflow.serving.http_limits import head_timeout_protocol
    max_connections = room_for_connections(config.max_connections)
    uvicorn.run(create_app(config), host=args.host, port=args.port,
                log_level=args.log_level, access_log=not args.no_access_log,
                timeout_graceful_shutdown=config.timeout + 5,
                http=head_timeout_protocol(config.header_timeout,
                                           max_connections=max_connections,
                                           grace=config.connection_grace),
                backlog=config.backlog,
                limit_concurrency=config.limit_concurrency or None,
                timeout_keep_alive=config.timeout_keep_alive)


def room_for_connections(wanted: int, spare: int = 256) -> int:
    """Raise this process's open-file limit to hold ``wanted`` sockets plus ``spare``
    other files (up to the hard limit; many systems start at a soft limit of 1024);
    ``wanted``, or fewer if the hard limit is lower (with a warning)."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = wanted + spare
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < need:
        log.warning("serve_mnist: %d open files allowed (ulimit -n): --max-connections "
                    "lowered from %d to %d", soft, wanted, max(1, soft - spare))
        return max(1, soft - spare)
    return wanted


if __name__ == "__main__":
    main()
