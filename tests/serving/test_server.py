"""examples/serve_mnist.py through a real HTTP client: httpx over ASGITransport, with the
app's lifespan driven by asgi-lifespan's LifespanManager (startup and shutdown run in the
test's own event loop, as under uvicorn), and once as a real uvicorn process on 127.0.0.1.

The checkpoint (``conftest.py``) is a small MLP, trained for a few steps on the bundled
digits and saved the way quickstart.py saves it.
"""
import asyncio
import io
import json
import struct
import time
import zlib

import httpx
import numpy as np
import pytest
import pytest_asyncio
from asgi_lifespan import LifespanManager
from PIL import Image

import aioflow as flow
from aioflow.checkpoint import io as checkpoint_io
from aioflow.engine import session as session_mod
from serving_helpers import ServerProcess, load_server_module

pytestmark = pytest.mark.timeout(60)

PREDICT = "/v1/models/mnist:predict"
PNG = "/v1/models/mnist:classify-png"


serve_mnist = load_server_module()


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


@pytest.fixture(scope="module")
def digits():
    (train_x, train_y), (test_x, test_y) = flow.data.load_digits(100, 100)
    return train_x, train_y, test_x[0], test_y[0]


def reference_probabilities(checkpoint, images):
    """The MLP in numpy from the checkpoint's arrays: what the server must answer."""
    v = checkpoint_io.read_arrays(checkpoint)
    x = np.asarray(images, np.float64).reshape(len(images), -1)
    hidden = np.maximum(x @ v["hidden-weight"].T + v["hidden-bias"], 0)
    logits = hidden @ v["output-weight"].T + v["output-bias"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def config(checkpoint, **overrides):
    settings = dict(checkpoint=checkpoint, model="mlp", batch_size=8, max_instances=8,
                    max_body_bytes=200_000, max_image_pixels=40_000, max_wait=0.05)
    settings.update(overrides)
    return serve_mnist.ServerConfig(**settings)


@pytest_asyncio.fixture
async def client(checkpoint):
    app = serve_mnist.create_app(config(checkpoint))
    async with LifespanManager(app, startup_timeout=30, shutdown_timeout=30) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mnist") as c:
            c.app = app
            yield c


def png_bytes(array) -> bytes:
    """uint8 (h, w) -> a grayscale PNG, (h, w, 3) -> an RGB PNG."""
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def fake_png_header(width, height) -> bytes:
    """A tiny file declaring a huge image (IHDR only): a decompression bomb's header."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr
    return (b"\x89PNG\r\n\x1a\n" + chunk + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
            + b"\x00\x00\x00\x00IEND\xaeB`\x82")


async def test_predict_matches_the_model_and_batches_concurrent_requests(client, checkpoint,
                                                                         digits):
    _, _, test_x, _ = digits
    images = test_x[:12].reshape(12, 784)
    expected = reference_probabilities(checkpoint, images)

    # one request, several instances, both instance layouts
    body = {"instances": [images[0].tolist(), images[1].reshape(28, 28).tolist()]}
    response = await client.post(PREDICT, json=body)
    assert response.status_code == 200, response.text
    predictions = np.array(response.json()["predictions"])
    assert predictions.shape == (2, 10)
    np.testing.assert_allclose(predictions, expected[:2], atol=1e-5)
    np.testing.assert_allclose(predictions.sum(axis=1), 1.0, atol=1e-5)

    # many concurrent one-instance requests: fewer steps than requests, each its own answer
    before = client.app.state.model.metrics()["batches"]
    responses = await asyncio.gather(*(client.post(PREDICT, json={"instances": [img.tolist()]})
                                       for img in images))
    assert all(r.status_code == 200 for r in responses)
    got = np.array([r.json()["predictions"][0] for r in responses])
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert client.app.state.model.metrics()["batches"] - before < len(images)


async def test_png_upload_is_classified_like_the_same_pixels(client, checkpoint, digits):
    _, _, test_x, _ = digits
    pixels = np.round(test_x[0, 0] * 255).astype(np.uint8)
    expected = reference_probabilities(checkpoint, (pixels / 255.0)[None])
    response = await client.post(PNG, content=png_bytes(pixels),
                                 headers={"content-type": "image/png"})
    assert response.status_code == 200, response.text
    np.testing.assert_allclose(response.json()["predictions"], expected, atol=1e-4)
    assert response.json()["classes"] == [int(expected.argmax())]
    # the same digit, black on white, RGB, four times the size: decoded back to (nearly)
    # the same 28x28 light-on-dark pixels, and answered as the model answers those
    big = png_bytes(np.stack([np.kron(255 - pixels, np.ones((4, 4), np.uint8))] * 3, axis=-1))
    decoded = serve_mnist.decode_png(big, 40_000)
    assert np.corrcoef(decoded.ravel(), pixels.ravel() / 255.0)[0, 1] > 0.95
    response = await client.post(PNG, content=big)
    assert response.status_code == 200, response.text
    np.testing.assert_allclose(response.json()["predictions"],
                               reference_probabilities(checkpoint, decoded[None]), atol=1e-4)


async def test_png_as_a_multipart_form_or_on_the_predict_route(client, checkpoint, digits):
    _, _, test_x, _ = digits
    pixels = np.round(test_x[0, 0] * 255).astype(np.uint8)
    expected = reference_probabilities(checkpoint, (pixels / 255.0)[None])
    png = png_bytes(pixels)
    for route in (PNG, PREDICT):
        form = await client.post(route, files={"file": ("digit.png", png, "image/png")},
                                 data={"note": "a text field first is fine"})
        raw = await client.post(route, content=png, headers={"content-type": "image/png"})
        for response in (form, raw):
            assert response.status_code == 200, (route, response.text)
            np.testing.assert_allclose(response.json()["predictions"], expected, atol=1e-4)
            assert response.json()["classes"] == [int(expected.argmax())]
    refused = await client.post(PNG, files={"file": ("notes.txt", b"hello", "text/plain")})
    assert refused.status_code == 415 and "holds no PNG" in refused.json()["error"]
    refused = await client.post(PNG, content=b"--x\r\n",
                                headers={"content-type": "multipart/form-data"})
    assert refused.status_code == 400 and "boundary" in refused.json()["error"]
    assert (await client.post(PREDICT, json=_valid_body())).status_code == 200


def _valid_body():
    return {"instances": [[0.5] * 784]}


MALFORMED_JSON = [
    # (case, body bytes, status, text expected in the error)
    ("not JSON", b"this is not json", 400, "not valid JSON"),
    ("not UTF-8", b"\xff\xfe{", 400, "not valid JSON"),
    ("deeply nested", b"[" * 100_000, 400, "deeply nested"),
    ("nested in an instance", b'{"instances": [' + b"[" * 900 + b"0]" + b"]" * 900, 400,
     "deeply nested"),
    ("far too many values", b'{"instances": [[' + b"0," * 20_000 + b"0]]}", 413,
     "far more than the limit of 8 instances"),
    ("JSON array", b"[1, 2]", 400, '{"instances": [...]}'),
    ("no instances", b'{"inputs": [[0.5]]}', 400, '{"instances": [...]}'),
    ("instances not a list", b'{"instances": "x"}', 400, "non-empty list"),
    ("empty instances", b'{"instances": []}', 400, "non-empty list"),
    ("too many instances", json.dumps({"instances": [[0.0] * 784] * 9}).encode(), 413,
     "limit is 8"),
    ("wrong length", json.dumps({"instances": [[0.0] * 783]}).encode(), 400,
     "instance 0: expected 784 numbers or 28 lists of 28 numbers, got shape [783]"),
    ("28x27", json.dumps({"instances": [[[0.0] * 27] * 28]}).encode(), 400, "shape [28, 27]"),
    ("ragged", json.dumps({"instances": [[[0.0] * 28] * 27 + [[0.0] * 27]]}).encode(), 400,
     "ragged"),
    ("instance not a list", b'{"instances": [0.5]}', 400, "got float"),
    ("NaN", ('{"instances": [[NaN' + ", 0.0" * 783 + "]]}").encode(), 400, "NaN is not allowed"),
    ("Infinity", ('{"instances": [[-Infinity' + ", 0.0" * 783 + "]]}").encode(), 400,
     "-Infinity is not allowed"),
    ("overflow", ('{"instances": [[1e999' + ", 0.0" * 783 + "]]}").encode(), 400,
     "out of float32's range"),
    ("integer beyond any float", ('{"instances": [[1' + "0" * 400 + ", 0.0" * 783 + "]]}").encode(),
     400, "instance 0: a number out of float32's range"),
    ("above 1", json.dumps({"instances": [[0.0] * 783 + [255]]}).encode(), 400,
     "values must lie in [0, 1], got values from 0 to 255"),
    ("negative", json.dumps({"instances": [[0.5] * 783 + [-0.1]]}).encode(), 400,
     "values must lie in [0, 1]"),
    ("strings", json.dumps({"instances": [["0.5"] * 784]}).encode(), 400, "must be a number"),
    ("nulls", json.dumps({"instances": [[None] * 784]}).encode(), 400, "must be a number"),
    ("second instance bad", json.dumps({"instances": [[0.0] * 784, [0.0] * 5]}).encode(), 400,
     "instance 1"),
    ("body too large", b'{"instances": [' + b" " * 200_000 + b"]}", 413,
     "over the limit of 200000 bytes"),
]


@pytest.mark.parametrize("fast_parser", [True, False], ids=["orjson", "stdlib json"])
def test_parser_answers_the_same_with_and_without_orjson(monkeypatch, fast_parser):
    if fast_parser and serve_mnist.orjson is None:
        pytest.skip("orjson is not installed (it is in the serve and test extras)")
    if not fast_parser:
        monkeypatch.setattr(serve_mnist, "orjson", None)
    images = np.linspace(0, 1, 2 * 784).reshape(2, 28, 28)
    parsed = serve_mnist.parse_instances(json.dumps({"instances": images.tolist()}).encode(), 8)
    assert parsed.dtype == np.float32 and parsed.shape == (2, 1, 28, 28)
    np.testing.assert_array_equal(parsed, images.reshape(2, 1, 28, 28).astype(np.float32))
    for case, body, status, message in MALFORMED_JSON[:-1]:  # the last is the HTTP limit
        with pytest.raises(serve_mnist.ApiError) as refused:
            serve_mnist.parse_instances(body, 8)
        assert refused.value.status == status and message in refused.value.message, case


async def test_malformed_predict_requests_get_a_clear_4xx_and_serving_continues(client):
    for case, body, status, message in MALFORMED_JSON:
        response = await client.post(PREDICT, content=body,
                                     headers={"content-type": "application/json"})
        assert response.status_code == status, (case, response.text)
        assert message in response.json()["error"], (case, response.json())
        ok = await client.post(PREDICT, json=_valid_body())
        assert ok.status_code == 200, (case, ok.text)

    async def chunks():  # streamed without Content-Length: the limit still holds
        for _ in range(30):
            yield b" " * 10_000

    response = await client.post(PREDICT, content=chunks())
    assert response.status_code == 413 and "over the limit" in response.json()["error"]

    response = await client.get(PREDICT)
    assert response.status_code == 405 and "error" in response.json()
    response = await client.post("/v1/models/other:predict", json=_valid_body())
    assert response.status_code == 404 and "error" in response.json()
    assert (await client.post(PREDICT, json=_valid_body())).status_code == 200


@pytest.mark.parametrize("content_type", [None, "text/plain", "text/plain; charset=utf-8",
                                          "application/x-www-form-urlencoded", "text/html"])
async def test_json_sent_as_another_type_or_untyped_gets_415(client, content_type):
    body = json.dumps(_valid_body()).encode()
    headers = {} if content_type is None else {"content-type": content_type}
    response = await client.post(PREDICT, content=body, headers=headers)
    assert response.status_code == 415, response.text
    got = "no Content-Type" if content_type is None else \
        f"Content-Type {content_type.split(';')[0]!r}"
    assert f"must be JSON sent as Content-Type: application/json (got {got}" in \
        response.json()["error"]
    for accepted in ("application/json", "application/json; charset=utf-8",
                     "application/vnd.mnist+json"):
        ok = await client.post(PREDICT, content=body, headers={"content-type": accepted})
        assert ok.status_code == 200, (accepted, ok.text)


async def test_malformed_uploads_get_a_clear_4xx_and_serving_continues(client):
    valid = png_bytes(np.zeros((28, 28), np.uint8))
    noise = png_bytes(np.random.default_rng(0).integers(0, 256, (28, 28), dtype=np.uint8))
    solid = png_bytes(np.zeros((300, 300), np.uint8))  # small file, 90,000 pixels
    cases = [
        ("not an image", b"hello, world", 415, "not a PNG image"),
        ("JPEG magic", b"\xff\xd8\xff\xe0" + b"\x00" * 100, 415, "not a PNG image"),
        ("empty", b"", 415, "not a PNG image"),
        ("signature only", b"\x89PNG\r\n\x1a\n", 400, "malformed PNG"),
        ("truncated", noise[:len(noise) // 2], 400, "malformed PNG: truncated"),
        ("corrupt data", noise[:41] + bytes(len(noise) - 41), 400, "malformed PNG"),
        ("bomb header", fake_png_header(100_000, 100_000), 413, "over the limit of 40000 pixels"),
        ("too many pixels", solid, 413, "image of 300x300 pixels"),
        ("zero size", fake_png_header(0, 5), 400, "malformed PNG"),
    ]
    for case, body, status, message in cases:
        response = await client.post(PNG, content=body, headers={"content-type": "image/png"})
        assert response.status_code == status, (case, response.text)
        assert message in response.json()["error"], (case, response.json())
        ok = await client.post(PNG, content=valid)
        assert ok.status_code == 200, (case, ok.text)


async def test_healthz_and_metrics(client):
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "model": "mlp", "batching": True}
    await client.post(PREDICT, content=b"nope", headers={"content-type": "application/json"})
    await asyncio.gather(*(client.post(PREDICT, json=_valid_body()) for _ in range(5)))
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = response.text
    assert 'serve_mnist_http_responses_total{route="predict",status="400"} 1' in text
    assert 'serve_mnist_http_responses_total{route="predict",status="200"} 5' in text
    # the 5 clients' requests only: the start-up's warm-up call is not counted
    assert 'aioflow_serving_requests_total{model="mnist"} 5' in text
    assert 'aioflow_serving_batches_total{model="mnist"}' in text
    assert 'aioflow_serving_batch_size_bucket{model="mnist",le="8"}' in text


async def test_overload_answers_503_with_retry_after(checkpoint):
    app = serve_mnist.create_app(config(checkpoint, max_queue=8))
    async with LifespanManager(app, startup_timeout=30, shutdown_timeout=30) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mnist") as c:
            body = {"instances": [[0.5] * 784] * 8}
            lock = session_mod.default_session().lock
            lock.acquire()  # steps wait (held): the queue of 8 rows fills up
            try:
                requests = asyncio.ensure_future(
                    asyncio.gather(*(c.post(PREDICT, json=body) for _ in range(6))))
                deadline = time.monotonic() + 20
                while app.state.model.metrics()["rejected"] < 4:
                    assert time.monotonic() < deadline and not requests.done()
                    await asyncio.sleep(0.01)
            finally:
                lock.release()
            responses = await requests
            codes = sorted(r.status_code for r in responses)
            # the first request's batch is held; a second fits the queue if the batcher took
            # the first before it arrived (either order is right); the others are refused
            assert codes in ([200, 503, 503, 503, 503, 503], [200, 200, 503, 503, 503, 503])
            refused = next(r for r in responses if r.status_code == 503)
            assert refused.headers["retry-after"] == "1"
            assert "overloaded" in refused.json()["error"]
            assert (await c.post(PREDICT, json=_valid_body())).status_code == 200


@pytest.mark.parametrize("pad", [False, True], ids=["batch-1 job", "padded full job"])
async def test_unbatched_modes_serve_one_request_per_step(checkpoint, pad):
    app = serve_mnist.create_app(config(checkpoint, batching=False, pad=pad))
    async with LifespanManager(app, startup_timeout=30, shutdown_timeout=30) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mnist") as c:
            images = np.linspace(0, 1, 3 * 784).reshape(3, 784)
            response = await c.post(PREDICT, json={"instances": images.tolist()})
            assert response.status_code == 200
            np.testing.assert_allclose(response.json()["predictions"],
                                       reference_probabilities(checkpoint, images), atol=1e-5)
            metrics = app.state.model.metrics()
            # 3 requests, 3 steps: the warm-up at start-up is not counted
            assert metrics["max_batch_size"] == 1 and metrics["batches"] == 3
            assert app.state.model.batch_size == (8 if pad else 1)
            assert metrics["padded_rows"] == (3 * 7 if pad else 0)


async def test_startup_fails_clearly_without_a_usable_checkpoint(checkpoint, tmp_path):
    app = serve_mnist.create_app(config(str(tmp_path / "missing")))
    with pytest.raises(RuntimeError, match="run `python examples/quickstart.py` first"):
        async with LifespanManager(app, startup_timeout=30):
            pass
    await flow.clear_default_session()
    app = serve_mnist.create_app(config(checkpoint, model="lenet"))
    with pytest.raises(RuntimeError, match="was it saved by `quickstart.py --model lenet`"):
        async with LifespanManager(app, startup_timeout=30):
            pass


async def test_real_uvicorn_on_loopback(checkpoint, tmp_path):
    server = ServerProcess(checkpoint, tmp_path / "server.log", "--log-level", "warning")
    try:
        await asyncio.to_thread(server.wait_healthy)
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as c:
            responses = await asyncio.gather(*(c.post(PREDICT, json=_valid_body())
                                               for _ in range(16)))
            assert [r.status_code for r in responses] == [200] * 16
            first = responses[0].json()["predictions"]
            for r in responses:
                np.testing.assert_allclose(r.json()["predictions"], first, atol=1e-6)
            bad = await c.post(PREDICT, content=b'{"instances": [[NaN]]}',
                               headers={"content-type": "application/json"})
            assert bad.status_code == 400 and "NaN" in bad.json()["error"]
            assert (await c.post(PREDICT, json=_valid_body())).status_code == 200
            metrics = (await c.get("/metrics")).text
            assert 'aioflow_serving_succeeded_total{model="mnist"} 17' in metrics  # no warm-up
    finally:
        status = await asyncio.to_thread(server.stop)  # SIGINT: drain, lifespan shutdown
    assert status == 0, server.log()
