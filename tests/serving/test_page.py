"""The drawing page of examples/serve_mnist.py (``GET /``), in a real headless browser.

Chromium is driven over the DevTools protocol on a pipe (``browser.py``: no Python
dependency). Where no Chromium is installed (CI installs Python packages only) the browser
test is skipped with that reason; the page's own checks (served, self-contained) run
everywhere.
"""
import json
import re

import httpx
import pytest
from asgi_lifespan import LifespanManager

import aioflow as flow
from browser import Chromium, canvas_origin, find_chromium, seven
from serving_helpers import ServerProcess, load_server_module

pytestmark = pytest.mark.timeout(90)

serve_mnist = load_server_module()


@pytest.fixture
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


async def test_the_page_is_served_and_self_contained(checkpoint, fresh_session):
    config = serve_mnist.ServerConfig(checkpoint=checkpoint, model="mlp", batch_size=8)
    app = serve_mnist.create_app(config)
    async with LifespanManager(app, startup_timeout=30, shutdown_timeout=30) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mnist") as c:
            response = await c.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    html = response.text
    # offline: nothing loaded from elsewhere (no src/href to another origin, no imports)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html), "external resource"
    assert "import(" not in html and "<link" not in html
    # it posts to the PNG route, draws with pointer events
    assert serve_mnist.PNG_PATH in html and "pointerdown" in html and "pointermove" in html


@pytest.fixture(scope="module")
def chromium():
    executable = find_chromium()
    if executable is None:
        pytest.skip("no Chromium browser installed (apt-get install chromium), so the "
                    "drawing page is not tested in a browser")
    return executable


@pytest.mark.parametrize("pointer", ["mouse", "touch"])
def test_drawing_a_digit_shows_ten_probabilities(chromium, checkpoint, tmp_path, pointer):
    server = ServerProcess(checkpoint, tmp_path / "server.log", "--log-level", "warning")
    try:
        server.wait_healthy()
        with Chromium.launch(chromium) as browser:
            page = browser.new_page(680, 420)
            page.navigate(server.url + "/")
            assert page.evaluate("document.getElementById('bars').dataset.ready") == "0"
            stroke = seven(*canvas_origin(page))
            if pointer == "mouse":
                page.mouse_stroke(stroke)
            else:
                page.touch_stroke(stroke)
            page.wait_for("document.getElementById('bars').dataset.ready === '1'")
            probabilities = json.loads(page.evaluate(
                "JSON.stringify([...document.querySelectorAll('.bar')]"
                ".map(row => Number(row.dataset.p)))"))
            widths = json.loads(page.evaluate(
                "JSON.stringify([...document.querySelectorAll('.fill')]"
                ".map(bar => bar.getBoundingClientRect().width))"))
            # what the model was sent: the 28x28 preview, white ink on black, centred
            preview = json.loads(page.evaluate(
                "JSON.stringify(Array.from(document.getElementById('preview')"
                ".getContext('2d').getImageData(0, 0, 28, 28).data))"))
            (page_dir := tmp_path / "shots").mkdir()
            (page_dir / f"{pointer}.png").write_bytes(page.screenshot())
    finally:
        assert server.stop() == 0, server.log()
    assert len(probabilities) == 10 and all(0 <= p <= 1 for p in probabilities)
    assert abs(sum(probabilities) - 1) < 1e-3, probabilities
    best = max(range(10), key=probabilities.__getitem__)
    assert widths[best] == max(widths) > 0  # the bars show the probabilities
    red = [preview[4 * i] for i in range(784)]
    ink = [(i // 28, i % 28, v) for i, v in enumerate(red) if v > 0]
    assert 20 < len(ink) < 400, "the stroke reached the model as a digit-sized mark"
    mass = sum(v for _, _, v in ink)
    centre = (sum(r * v for r, _, v in ink) / mass, sum(c * v for _, c, v in ink) / mass)
    assert all(abs(x - 13.5) < 2 for x in centre), centre  # centred by its mass, as MNIST
    assert red[0] == red[27] == red[783] == 0  # black background


def test_no_browser_skips_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("AIOFLOW_CHROMIUM", str(tmp_path / "no-such-browser"))
    assert find_chromium() is None
