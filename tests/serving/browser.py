"""A headless Chromium driven over the Chrome DevTools protocol on a pipe: no dependency.

Why not Selenium or Playwright: both are large downloads (Playwright also fetches its own
browser), and the test needs four things the DevTools protocol gives directly: open a page,
dispatch real input events (``Input.dispatchMouseEvent`` / ``dispatchTouchEvent`` go through
the browser's input pipeline, so the page receives genuine pointer events, as from a mouse
or a finger), evaluate JavaScript, take a screenshot. With ``--remote-debugging-pipe`` the
protocol runs over two file descriptors (3: commands in, 4: answers out; JSON messages
ended by a NUL byte), so not even a WebSocket client is needed: the standard library does.

    with Chromium.launch() as browser:          # None-safe: Chromium.find() first
        page = browser.new_page(640, 400)
        page.navigate("http://127.0.0.1:8000/")
        page.evaluate("document.title")

Also a script that saves the serving page's screenshot for docs/serving.md:

    python tests/serving/browser.py --checkpoint ./quickstart_model --model lenet \\
        --out docs/serving-page.png
"""
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class BrowserError(RuntimeError):
    pass


def find_chromium():
    """The browser executable: ``$AIOFLOW_CHROMIUM`` or the first of CANDIDATES on PATH."""
    configured = os.environ.get("AIOFLOW_CHROMIUM")
    if configured:
        return configured if shutil.which(configured) else None
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _above_4(fd: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return moved


class Chromium:
    """One headless browser process and its protocol pipe."""

    def __init__(self, process, commands: int, answers: int, profile):
        self.process, self._out, self._in, self._profile = process, commands, answers, profile
        self._buffer = b""
        self._next_id = 0
        self.events = []  # (method, params, sessionId) not yet consumed

    @classmethod
    def launch(cls, executable=None):
        executable = executable or find_chromium()
        if executable is None:
            raise BrowserError("no Chromium found (install Debian's chromium package)")
        profile = tempfile.TemporaryDirectory(prefix="aioflow-chromium-")
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        # the browser's ends must not sit on fds 3 or 4 themselves (one dup2 below would
        # overwrite the other): move them above
        to_browser_r, from_browser_w = (_above_4(to_browser_r), _above_4(from_browser_w))
        args = [shutil.which(executable) or executable, "--headless=new", "--remote-debugging-pipe", "--no-sandbox",
                "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions",
                "--hide-scrollbars", "--mute-audio", f"--user-data-dir={profile.name}",
                "about:blank"]
        # a tiny Python wrapper puts the pipe ends on fds 3 and 4, where Chromium expects
        # them, and becomes the browser (a shell cannot: dash only names fds 0 to 9)
        wrapper = ("import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4);"
                   " os.execv(sys.argv[3], sys.argv[3:])")
        process = subprocess.Popen([sys.executable, "-c", wrapper, str(to_browser_r),
                                    str(from_browser_w), *args],
                                   pass_fds=(to_browser_r, from_browser_w),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        return cls(process, to_browser_w, from_browser_r, profile)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        try:
            if self.process.poll() is None:
                try:
                    self.send("Browser.close", timeout=5)
                except (BrowserError, OSError):
                    pass
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout=10)
        finally:
            for fd in (self._out, self._in):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._profile.cleanup()

    # -- the protocol ------------------------------------------------------------------------

    def _read_message(self, deadline):
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("the browser did not answer in time")
            ready, _, _ = select.select([self._in], [], [], left)
            if ready:
                data = os.read(self._in, 1 << 20)
                if not data:
                    raise BrowserError("the browser closed its protocol pipe")
                self._buffer += data
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def send(self, method: str, params=None, session=None, timeout=15.0):
        """Send a command; its result (events that arrive meanwhile are kept)."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            if "method" in answer:
                self.events.append((answer["method"], answer.get("params", {}),
                                    answer.get("sessionId")))

    def wait_event(self, method: str, session=None, timeout=15.0):
        deadline = time.monotonic() + timeout
        while True:
            for i, (name, params, sid) in enumerate(self.events):
                if name == method and (session is None or sid == session):
                    del self.events[i]
                    return params
            answer = self._read_message(deadline)
            if "method" in answer:
                self.events.append((answer["method"], answer.get("params", {}),
                                    answer.get("sessionId")))

    def new_page(self, width: int, height: int) -> "Page":
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget",
                            {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        page.call("Page.enable")
        page.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        return page


class Page:
    """One tab: navigate, evaluate, draw strokes, take screenshots."""

    def __init__(self, browser: Chromium, session: str):
        self.browser, self.session = browser, session

    def call(self, method, params=None, timeout=15.0):
        return self.browser.send(method, params, self.session, timeout)

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", {"url": url})
        self.browser.wait_event("Page.loadEventFired", self.session)

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", {"expression": expression,
                                                "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 15.0):
        """Poll a JavaScript expression until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"{expression!r} stayed false for {timeout} s")
            time.sleep(0.05)

    def mouse_stroke(self, points) -> None:
        """Press the left button at the first point, move through the rest, release."""
        (x, y), rest = points[0], points[1:]
        self.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
        self.call("Input.dispatchMouseEvent", {"type": "mousePressed", "x": x, "y": y,
                                               "button": "left", "buttons": 1,
                                               "clickCount": 1})
        for x, y in rest:
            self.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y,
                                                   "button": "left", "buttons": 1})
        self.call("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": x, "y": y,
                                               "button": "left", "buttons": 0,
                                               "clickCount": 1})

    def touch_stroke(self, points) -> None:
        """One finger down at the first point, moved through the rest, lifted."""
        self.call("Emulation.setTouchEmulationEnabled", {"enabled": True, "maxTouchPoints": 1})
        (x, y), rest = points[0], points[1:]
        self.call("Input.dispatchTouchEvent",
                  {"type": "touchStart", "touchPoints": [{"x": x, "y": y, "id": 1}]})
        for x, y in rest:
            self.call("Input.dispatchTouchEvent",
                      {"type": "touchMove", "touchPoints": [{"x": x, "y": y, "id": 1}]})
        self.call("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})

    def screenshot(self) -> bytes:
        return base64.b64decode(self.call("Page.captureScreenshot", {"format": "png"})["data"])


# -- the page's stroke and the docs' screenshot ---------------------------------------------

def seven(left: float, top: float, size: float = 280.0):
    """Points of a handwritten 7 on a canvas whose top-left corner is at (left, top)."""
    path = [(0.25, 0.22), (0.45, 0.2), (0.72, 0.2), (0.66, 0.38), (0.57, 0.56), (0.5, 0.8)]
    points = []
    for (x0, y0), (x1, y1) in zip(path, path[1:]):
        for i in range(8):
            t = i / 8
            points.append((left + size * (x0 + t * (x1 - x0)), top + size * (y0 + t * (y1 - y0))))
    points.append((left + size * path[-1][0], top + size * path[-1][1]))
    return points


def canvas_origin(page: Page):
    box = page.evaluate("JSON.stringify(document.getElementById('pad')"
                        ".getBoundingClientRect())")
    box = json.loads(box)
    return box["left"], box["top"]


def main(argv=None) -> None:
    import argparse
    import io
    import sys

    from PIL import Image

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from serving_helpers import ServerProcess

    parser = argparse.ArgumentParser(description="save a screenshot of serve_mnist's page")
    parser.add_argument("--checkpoint", default="./quickstart_model")
    parser.add_argument("--model", default="lenet")
    parser.add_argument("--out", default="docs/serving-page.png")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(args.checkpoint, os.path.join(tmp, "server.log"),
                               "--model", args.model, "--log-level", "warning")
        try:
            server.wait_healthy()
            with Chromium.launch() as browser:
                page = browser.new_page(680, 420)
                page.navigate(server.url + "/")
                page.mouse_stroke(seven(*canvas_origin(page)))
                page.wait_for("document.getElementById('bars').dataset.ready === '1'")
                png = page.screenshot()
        finally:
            server.stop()
    # a palette of 64 colours keeps the file small for the repository
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(64)
    image.save(args.out, optimize=True)
    print(f"saved {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
