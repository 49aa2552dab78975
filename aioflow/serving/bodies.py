"""Reading and checking request bodies for a public endpoint, bounded in time, size and work.

Framework-free (plain ASGI ``receive`` and bytes; the standard library only), so any
ASGI server built on :class:`~aioflow.serving.DynamicBatcher` can use it:

* :func:`read_body` reads a body within a size limit (declared and streamed) and a
  deadline, and tells a client that went away (:class:`ClientDisconnected`) from a
  malformed request;
* :func:`multipart_file` takes the first file of a ``multipart/form-data`` body that
  starts with given magic bytes, with a bounded number of parts, bounded part headers and
  no nested multiparts (RFC 7578 dropped them), in one linear pass of ``bytes.find``;
* :func:`check_png` walks a PNG's chunks before any decoding: signature, IHDR first,
  every chunk's CRC, a bounded number of chunks, IEND at the end, and the pixel count
  from the header (a 100-byte file can declare a gigapixel image).

Every refusal is a :class:`BodyError` carrying the HTTP status a server should answer.
"""
import asyncio
import struct
import time
import zlib

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class BodyError(Exception):
    """A request body refused: answer ``status`` with ``{"error": message}``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class ClientDisconnected(Exception):
    """The client closed the connection before its body arrived: nobody to answer."""

    def __init__(self, received: int):
        super().__init__(f"client disconnected after {received} bytes of the body")
        self.received = received


async def read_body(receive, headers, limit: int, timeout=None) -> bytes:
    """The body from ASGI ``receive``: at most ``limit`` bytes, within ``timeout`` seconds.

    ``headers`` is a mapping with lower-case keys (Starlette's ``request.headers``).
    A declared ``Content-Length`` over the limit is refused before a byte is read (413),
    a streamed body as soon as it passes the limit (413); a body that has not fully
    arrived ``timeout`` seconds after this call is refused with 408 (a stalled or
    trickling client must not hold a connection and its buffered bytes for ever);
    a client that disconnects raises :class:`ClientDisconnected`.
    """
    declared = headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise BodyError(400, "invalid Content-Length header")
        if int(declared) > limit:
            raise BodyError(413, f"request body of {declared} bytes is over the limit of "
                                 f"{limit} bytes")
    chunks, size = [], 0
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if deadline is None:
            message = await receive()
        else:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise asyncio.TimeoutError
                message = await asyncio.wait_for(receive(), left)
            except asyncio.TimeoutError:
                raise BodyError(408, f"the request body did not arrive within {timeout:g} s "
                                     f"({size} bytes received)") from None
        if message["type"] == "http.disconnect":
            raise ClientDisconnected(size)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyError(413, f"request body is over the limit of {limit} bytes")
        if chunk:
            chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


# -- multipart/form-data ---------------------------------------------------------------------

MAX_PART_HEADER_BYTES = 4096  # a browser's part header is ~100 bytes


def _boundary(content_type: str) -> bytes:
    for parameter in content_type.split(";")[1:]:
        name, _, value = parameter.strip().partition("=")
        if name.strip().lower() == "boundary":
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            # RFC 2046: 1 to 70 characters, printable ASCII
            if 1 <= len(value) <= 70 and value.isascii() and value.isprintable():
                return value.encode("ascii")
            raise BodyError(400, "malformed multipart form: invalid boundary")
    raise BodyError(400, "multipart/form-data upload without a boundary")


def _part_headers(block: bytes) -> dict:
    headers = {}
    for line in block.split(b"\r\n"):
        name, colon, value = line.partition(b":")
        if not colon:
            raise BodyError(400, "malformed multipart form: a part header line without ':'")
        headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return headers


def multipart_file(content_type: str, body: bytes, magic: bytes, max_parts: int = 16):
    """The first part of a ``multipart/form-data`` body whose content starts with
    ``magic``; None when no part does.

    Linear in the body (``bytes.find`` from boundary to boundary, no backtracking) and
    bounded: more than ``max_parts`` parts, a part header over 4 KiB, a nested multipart
    part or a missing closing boundary are refused with 400 at the first offence, so a
    body of 70,000 nested empty parts costs what its first two parts cost.
    """
    delimiter = b"--" + _boundary(content_type)
    # the first delimiter may open the body, or follow a preamble after a CRLF
    if body.startswith(delimiter):
        position = len(delimiter)
    else:
        start = body.find(b"\r\n" + delimiter)
        if start < 0:
            raise BodyError(400, "malformed multipart form: no boundary line")
        position = start + 2 + len(delimiter)
    separator = b"\r\n" + delimiter
    parts = 0
    while True:
        if body.startswith(b"--", position):  # the closing delimiter
            return None
        if not body.startswith(b"\r\n", position):
            raise BodyError(400, "malformed multipart form: a boundary line is not "
                                 "followed by CRLF")
        parts += 1
        if parts > max_parts:
            raise BodyError(400, f"multipart form of more than {max_parts} parts (the "
                                 "limit)")
        head_start = position + 2
        if body.startswith(b"\r\n", head_start):  # a part without headers
            head_end = head_start - 2
        else:
            head_end = body.find(b"\r\n\r\n", head_start,
                                 head_start + MAX_PART_HEADER_BYTES + 4)
            if head_end < 0:
                raise BodyError(400, "malformed multipart form: a part's headers are "
                                     "unterminated or over 4096 bytes")
        headers = _part_headers(body[head_start:head_end]) if head_end > head_start else {}
        part_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if part_type.startswith("multipart/"):
            raise BodyError(400, "malformed multipart form: nested multipart parts are not "
                                 "accepted (send the file as one field)")
        encoding = headers.get("content-transfer-encoding", "binary").lower()
        if encoding not in ("binary", "8bit", "7bit"):
            raise BodyError(400, f"multipart part with Content-Transfer-Encoding {encoding!r} "
                                 "(send the file's bytes as they are)")
        content_start = head_end + 4
        content_end = body.find(separator, content_start)
        if content_end < 0:
            raise BodyError(400, "malformed multipart form: no closing boundary")
        if body.startswith(magic, content_start) and content_end - content_start >= len(magic):
            return body[content_start:content_end]
        position = content_end + len(separator)


# -- PNG structure ---------------------------------------------------------------------------

def check_png(body: bytes, max_pixels: int, max_chunks: int = 1024):
    """(width, height) of a PNG whose structure is sound, before anything is decoded.

    Refuses with a :class:`BodyError`: a body that is not a PNG (415); a first chunk
    that is not IHDR, a zero size, a chunk with a wrong CRC, a chunk running past the end,
    no IEND (a truncated file) (400); more than ``max_chunks`` chunks (400: an encoder
    writes a handful; a file of 300,000 one-byte IDAT chunks makes a decoder crawl) and
    more than ``max_pixels`` pixels (413: a decompression bomb). Pillow skips the CRCs of
    image data chunks and, with ``ImageFile.LOAD_TRUNCATED_IMAGES``, accepts truncated
    files; this check does neither, whatever Pillow's global settings.
    """
    if not body.startswith(PNG_SIGNATURE):
        raise BodyError(415, "the body is not a PNG image (send the PNG file itself as the "
                             "body, e.g. curl --data-binary @digit.png)")
    if len(body) < 33 or body[12:16] != b"IHDR":
        raise BodyError(400, "malformed PNG: it does not start with an IHDR chunk")
    width, height = struct.unpack(">II", body[16:24])
    if not width or not height:
        raise BodyError(400, f"malformed PNG: size {width}x{height}")
    if width * height > max_pixels:
        raise BodyError(413, f"image of {width}x{height} pixels is over the limit of "
                             f"{max_pixels} pixels")
    view = memoryview(body)  # CRCs over slices of the body without copying them
    position, chunks, end = len(PNG_SIGNATURE), 0, len(body)
    while True:
        if position + 12 > end:
            raise BodyError(400, "malformed PNG: truncated (no IEND chunk)")
        length, kind = struct.unpack(">I4s", body[position:position + 8])
        kind = kind.decode("latin-1")
        data_end = position + 8 + length
        if data_end + 4 > end:
            raise BodyError(400, f"malformed PNG: truncated (in a {kind!r} chunk)")
        chunks += 1
        if chunks > max_chunks:
            raise BodyError(400, f"malformed PNG: more than {max_chunks} chunks")
        (crc,) = struct.unpack(">I", body[data_end:data_end + 4])
        if zlib.crc32(view[position + 4:data_end]) != crc:
            raise BodyError(400, f"malformed PNG: bad CRC in a {kind!r} "
                                 "chunk (the file is corrupt)")
        position = data_end + 4
        if kind == "IEND":
            return width, height
