"""Issue 17, memory: the server's resident memory stays flat over 5000 served requests.

In process (httpx over ASGI, so the figure is this process's RSS, read from /proc): a
warm-up of 1000 requests (allocator pools, the latency windows, numpy and orjson caches
settle), then 4000 more; RSS afterwards is within 5% of RSS after the warm-up. Requests
mix the JSON and PNG routes and some refused ones, 16 at a time.
"""
import asyncio
import io
import os

import httpx
import numpy as np
import pytest
from asgi_lifespan import LifespanManager
from PIL import Image

import aioflow as flow
from serving_helpers import load_server_module

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not os.path.exists("/proc/self/statm"),
                                 reason="reads resident memory from /proc (Linux)")]

serve_mnist = load_server_module()
PREDICT = "/v1/models/mnist:predict"
PNG = "/v1/models/mnist:classify-png"


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.fixture
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


async def test_rss_stays_flat_over_5000_requests(checkpoint, fresh_session):
    images = np.random.default_rng(0).random((16, 784)).round(3)
    bodies = [(PREDICT, {"json": {"instances": [image.tolist()]}}) for image in images]
    buffer = io.BytesIO()
    Image.fromarray((images[0].reshape(28, 28) * 255).astype(np.uint8)).save(buffer, "PNG")
    bodies.append((PNG, {"content": buffer.getvalue()}))
    bodies.append((PREDICT, {"content": b'{"instances": [[NaN]]}',   # refused: 400
                             "headers": {"content-type": "application/json"}}))
    config = serve_mnist.ServerConfig(checkpoint=checkpoint, model="mlp", batch_size=16,
                                      max_instances=16, max_wait=0.002)
    app = serve_mnist.create_app(config)
    async with LifespanManager(app, startup_timeout=30, shutdown_timeout=30) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mnist") as client:
            async def serve(count: int, worker: int) -> None:
                for i in range(count):
                    route, kwargs = bodies[(worker + 16 * i) % len(bodies)]
                    response = await client.post(route, **kwargs)
                    assert response.status_code in (200, 400), response.text

            await asyncio.gather(*(serve(1000 // 16 + 1, w) for w in range(16)))
            warm = rss_bytes()
            await asyncio.gather(*(serve(4000 // 16 + 1, w) for w in range(16)))
            after = rss_bytes()
    served = app.state.model.metrics()["requests"]
    assert served >= 4500  # the two JSON/PNG routes that reached the model
    growth = (after - warm) / warm
    assert growth < 0.05, (f"RSS grew {100 * growth:.1f}% over 4000 requests after the warm-up "
                           f"({warm / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB)")
