"""aioflow.serving.bodies and aioflow.serving.offload: bounded body reading, multipart and PNG
checks, and the parse pool's deadline. No server: plain ASGI receive callables and bytes."""
import asyncio
import gc
import io
import struct
import threading
import time
import zlib

import numpy as np
import pytest
from PIL import Image

from aioflow.serving.bodies import (PNG_SIGNATURE, BodyError, ClientDisconnected, check_png,
                                    multipart_file, read_body)
from aioflow.serving.offload import ParseBusyError, ParsePool, ParseTimeoutError

pytestmark = pytest.mark.timeout(30)

FORM = "multipart/form-data; boundary=XyZ"


class cpu_time:
    """``with cpu_time() as took:`` ... ``took.seconds``: this thread's CPU time, with the
    garbage collector held off. The refusals below must be quick where the bombs took
    seconds; wall-clock time would also count the host's preemptions (this VM stops a
    thread for up to 12 ms) and a full collection after thousands of tests (100-300 ms)."""

    def __enter__(self):
        self._gc_was_on = gc.isenabled()
        gc.disable()
        self._start = time.thread_time()
        return self

    def __exit__(self, *exc):
        self.seconds = time.thread_time() - self._start
        if self._gc_was_on:
            gc.enable()
        return False


def chunk(kind: bytes, data: bytes, crc=None) -> bytes:
    crc = zlib.crc32(kind + data) if crc is None else crc
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def png_from_chunks(width: int, height: int, idat_pieces) -> bytes:
    """A grayscale 8-bit PNG whose compressed image data is split into ``idat_pieces``."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (PNG_SIGNATURE + chunk(b"IHDR", ihdr)
            + b"".join(chunk(b"IDAT", piece) for piece in idat_pieces) + chunk(b"IEND", b""))


def zero_image_data(width: int, height: int) -> bytes:
    return zlib.compress(b"\x00" * ((width + 1) * height), 9)


def real_png() -> bytes:
    buffer = io.BytesIO()
    pixels = np.random.default_rng(0).integers(0, 256, (28, 28), dtype=np.uint8)
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


# -- multipart ---------------------------------------------------------------------------------

def form(*parts: bytes, boundary=b"XyZ") -> bytes:
    return (b"".join(b"--" + boundary + b"\r\n" + part + b"\r\n" for part in parts)
            + b"--" + boundary + b"--\r\n")


def test_multipart_finds_the_first_png_file_after_other_fields():
    png = real_png()
    body = form(b'Content-Disposition: form-data; name="note"\r\n\r\nhello',
                b'Content-Disposition: form-data; name="file"; filename="d.png"\r\n'
                b"Content-Type: image/png\r\n\r\n" + png)
    assert multipart_file(FORM, body, PNG_SIGNATURE) == png
    # a quoted boundary, a preamble, a part without headers
    quoted = b"preamble\r\n" + form(b"\r\n" + png, boundary=b"a b'c")
    assert multipart_file('multipart/form-data; boundary="a b\'c"', quoted, PNG_SIGNATURE) == png
    assert multipart_file(FORM, form(b"\r\nno png here"), PNG_SIGNATURE) is None


def test_the_nested_multipart_bomb_of_issue_17_is_refused_at_its_first_part():
    # 3.8 MB, 70,000 nested empty parts: the email parser took ~16 s per body
    body = (b"--XyZ\r\n" + b"Content-Type: multipart/mixed; boundary=XyZ\r\n\r\n--XyZ\r\n" * 70000
            + b"--XyZ--\r\n")
    with cpu_time() as took, pytest.raises(BodyError, match="nested multipart") as refused:
        multipart_file(FORM, body, PNG_SIGNATURE)
    assert refused.value.status == 400 and took.seconds < 0.05


@pytest.mark.parametrize("case, content_type, body, message", [
    ("70,000 flat parts", FORM, form(*[b"\r\nx"] * 70000), "more than 16 parts"),
    ("no boundary", "multipart/form-data", form(b"\r\nx"), "without a boundary"),
    ("boundary too long", "multipart/form-data; boundary=" + "b" * 71, b"", "invalid boundary"),
    ("no boundary line", FORM, b"just bytes", "no boundary line"),
    ("no closing boundary", FORM, b"--XyZ\r\n\r\n" + b"x" * 1000, "no closing boundary"),
    ("garbage after a boundary", FORM, b"--XyZ!!\r\n", "not followed by CRLF"),
    ("huge part header", FORM, form(b"X-Pad: " + b"p" * 5000 + b"\r\n\r\nx"), "over 4096"),
    ("header line without colon", FORM, form(b"nonsense\r\n\r\nx"), "without ':'"),
    ("base64 part", FORM, form(b"Content-Transfer-Encoding: base64\r\n\r\niVBORw0K"),
     "Content-Transfer-Encoding"),
], ids=lambda value: value if isinstance(value, str) and len(value) < 40 else "")
def test_malformed_or_oversized_forms_are_refused_quickly(case, content_type, body, message):
    with cpu_time() as took, pytest.raises(BodyError, match=message) as refused:
        multipart_file(content_type, body, PNG_SIGNATURE)
    assert refused.value.status == 400, case
    assert took.seconds < 0.1, case


# -- PNG structure -------------------------------------------------------------------------

def test_a_sound_png_passes_and_reports_its_size():
    assert check_png(real_png(), 1000) == (28, 28)
    assert check_png(png_from_chunks(50, 40, [zero_image_data(50, 40)]), 2000) == (50, 40)


def test_a_bad_crc_anywhere_is_refused_even_where_pillow_decodes_it():
    png = bytearray(real_png())
    idat = png.index(b"IDAT")
    length = struct.unpack(">I", png[idat - 4:idat])[0]
    png[idat + 4 + length] ^= 0xFF  # the IDAT chunk's CRC
    with Image.open(io.BytesIO(bytes(png))) as image:
        image.load()  # Pillow does not check image data CRCs: this decodes "fine"
    with pytest.raises(BodyError, match="bad CRC in a 'IDAT' chunk") as refused:
        check_png(bytes(png), 1000)
    assert refused.value.status == 400
    flipped = bytearray(real_png())
    flipped[idat + 10] ^= 0x01  # one bit of the compressed data: the CRC catches it
    with pytest.raises(BodyError, match="bad CRC"):
        check_png(bytes(flipped), 1000)


def test_bombs_and_truncations_are_refused_before_decoding():
    huge = png_from_chunks(100_000, 100_000, [b"x"])  # a 10-gigapixel claim in 70 bytes
    with pytest.raises(BodyError, match="100000x100000 pixels is over the limit") as refused:
        check_png(huge, 1 << 20)
    assert refused.value.status == 413
    # under the pixel cap, but its data in 100,000 one-byte chunks: slow to decode
    data = zero_image_data(1000, 1000)
    crawl = png_from_chunks(1000, 1000, [data[i:i + 1] for i in range(len(data))] * 100)
    with cpu_time() as took, pytest.raises(BodyError, match="more than 1024 chunks"):
        check_png(crawl, 1 << 20)
    assert took.seconds < 0.1
    good = real_png()
    for cut in (len(good) - 1, len(good) - 12, 40):
        with pytest.raises(BodyError, match="truncated"):
            check_png(good[:cut], 1000)
    with pytest.raises(BodyError, match="not a PNG") as refused:
        check_png(b"GIF89a", 1000)
    assert refused.value.status == 415


# -- reading a body ------------------------------------------------------------------------

def receiver(*messages, stall=False):
    """An ASGI receive callable: the given messages, then (stall) waits for ever."""
    queue = list(messages)

    async def receive():
        if queue:
            return queue.pop(0)
        if stall:
            await asyncio.sleep(3600)
        return {"type": "http.disconnect"}
    return receive


async def test_read_body_limits_size_time_and_reports_disconnects():
    body = await read_body(receiver({"type": "http.request", "body": b"ab", "more_body": True},
                                    {"type": "http.request", "body": b"c"}), {}, 10, 1.0)
    assert body == b"abc"
    with pytest.raises(BodyError, match="over the limit of 10 bytes") as refused:
        await read_body(receiver(), {"content-length": "11"}, 10)
    assert refused.value.status == 413
    with pytest.raises(BodyError, match="over the limit"):
        await read_body(receiver(*[{"type": "http.request", "body": b"x" * 4,
                                    "more_body": True}] * 3), {}, 10)
    # a body that stalls half-way: refused at the deadline, not left waiting
    started = time.monotonic()
    with pytest.raises(BodyError, match="did not arrive within 0.3 s") as refused:
        await read_body(receiver({"type": "http.request", "body": b"x", "more_body": True},
                                 stall=True), {"content-length": "5"}, 10, 0.3)
    assert refused.value.status == 408 and time.monotonic() - started < 1.0
    with pytest.raises(ClientDisconnected) as gone:
        await read_body(receiver({"type": "http.request", "body": b"xy", "more_body": True}),
                        {}, 10, 1.0)
    assert gone.value.received == 2


# -- the parse pool ------------------------------------------------------------------------

async def test_parse_pool_answers_at_its_deadline_and_bounds_runaway_work():
    pool = ParsePool(threads=1, queue=1, timeout=0.2)
    release = threading.Event()
    try:
        assert await pool.run(sum, [1, 2, 3]) == 6
        with pytest.raises(ZeroDivisionError):
            await pool.run(lambda: 1 / 0)
        started = time.monotonic()
        with pytest.raises(ParseTimeoutError, match="over 0.2 s"):
            await pool.run(release.wait, 10)
        assert time.monotonic() - started < 0.6
        # the timed-out thread still runs: it keeps its slot; one more may queue, then 503
        assert pool.in_use == 1
        queued = asyncio.ensure_future(pool.run(sum, [1], timeout=5))
        await asyncio.sleep(0)
        with pytest.raises(ParseBusyError):
            await pool.run(sum, [2])
        release.set()
        assert await queued == 1
        for _ in range(100):
            if pool.in_use == 0:
                break
            await asyncio.sleep(0.01)
        assert pool.in_use == 0
    finally:
        release.set()
        pool.close()
