"""The HTTP request handler: bounded request bodies, and Google error JSON for every error.

A request body is read only when it is declared (``Content-Length``, or the chunked transfer
coding) and no larger than the ``max_request_bytes`` setting (32 MiB, as Google's front ends);
a larger one is answered 413 before any of it is read. A ``Content-Length`` that is not a
decimal number (negative, garbage, two different values) or a malformed chunk is 400, another
transfer coding 501. After those the connection is closed, since where the request ends is
unknown; what the client still sends is read and dropped for a moment (at most the limit) so
that the answer is not lost to a reset.

Errors ``BaseHTTPRequestHandler`` finds itself (a bad request line, an unsupported method,
malformed or too many headers, an over-long line) are answered in the same Google error JSON
(``application/json``), never the HTML page. A response that is not standard JSON (a
non-finite number) and an unexpected failure are emulator bugs, answered 500 INTERNAL.
"""

from __future__ import annotations

import http.server
import logging
import re
import socket
import struct
import time
from typing import Any

from vsp.vertex_emulator import errors, jsonbody

JSON_TYPE = "application/json; charset=UTF-8"
LINGER_SECONDS = 1.0
MAX_CHUNK_LINE = 4096
MAX_TRAILERS = 100

_LENGTH = re.compile(r"[0-9]+")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")

log = logging.getLogger(__name__)


def status_for(code: int) -> str:
    """The canonical status name an HTTP error code is answered with."""
    if code in errors.STATUS_BY_HTTP:
        return errors.STATUS_BY_HTTP[code]
    if code < 500:
        return "INVALID_ARGUMENT"
    return "UNIMPLEMENTED" if code == 505 else "INTERNAL"


def _refused(code: int, message: str) -> errors.ApiException:
    return errors.ApiException(status_for(code), message, http_status=code)


class RequestHandler(http.server.BaseHTTPRequestHandler):
    """Serves each request through ``server.app.handle``; every answer is JSON."""

    protocol_version = "HTTP/1.1"
    server_version = "VertexEmulator/0.1"
    disable_nagle_algorithm = True  # headers and body go out as two writes
    error_content_type = JSON_TYPE

    def do_GET(self) -> None:
        self._serve()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s - %s", self.address_string(), format % args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Answers a protocol error with Google error JSON and closes the connection.

        Args:
            code: HTTP status code.
            message: What is wrong; defaults to the status's reason phrase.
            explain: Ignored (the HTML page's longer text).
        """
        text = message or self.responses.get(code, ("Error",))[0]
        self.log_error("code %d, message %s", code, text)
        if self.request_version == "HTTP/0.9":  # the line did not parse: answer in HTTP/1.x
            self.request_version = "HTTP/1.0"
        self.close_connection = True
        self._send(code, errors.error_body(code, status_for(code), text))

    def handle_expect_100(self) -> bool:
        """Refuses an oversized or undelimited body before the client sends it."""
        try:
            self._body_framing()
        except errors.ApiException as exc:
            self._refuse(exc)
            return False
        return super().handle_expect_100()

    def _serve(self) -> None:
        try:
            raw = self._read_body()
        except errors.ApiException as exc:
            self._refuse(exc)
            return
        try:
            response = self.server.app.handle(self.command, self.path, raw)
        except Exception as exc:
            log.exception("emulator request failed: %s %s", self.command, self.path)
            message = f"Emulator bug: {exc!r}"
            self._send(500, errors.error_body(500, "INTERNAL", message))
            return
        if response is None:
            self._reset()
            return
        self._send(response.status, response.body, response.headers)

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        try:
            payload = jsonbody.encode(body)
        except (ValueError, TypeError, RecursionError) as exc:
            path = getattr(self, "path", "")
            log.error("emulator response to %s %s is not JSON: %r", self.command, path, exc)
            status, headers = 500, None
            message = f"Emulator bug: the response is not standard JSON ({exc})."
            payload = jsonbody.encode(errors.error_body(500, "INTERNAL", message))
        self.send_response(status)
        self.send_header("Content-Type", JSON_TYPE)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _body_framing(self) -> int | None:
        """The declared body length, or None for a chunked body.

        Raises:
            errors.ApiException: 400, 413 or 501 as described in the module docstring.
        """
        limit = self.server.app.settings.max_request_bytes
        lengths = {value.strip() for value in self.headers.get_all("Content-Length") or []}
        coding = self.headers.get("Transfer-Encoding")
        if coding is not None:
            if coding.strip().lower() != "chunked":
                raise _refused(501, f"Transfer-Encoding {coding!r} is not supported.")
            if lengths:
                raise _refused(400, "Content-Length is not allowed with Transfer-Encoding.")
            return None
        if len(lengths) > 1:
            raise _refused(400, "The request has conflicting Content-Length headers.")
        text = next(iter(lengths), "0")
        if not _LENGTH.fullmatch(text):
            raise _refused(400, f"Invalid Content-Length {text[:40]!r}.")
        if len(text) > 20 or int(text) > limit:
            raise _too_large(limit)
        return int(text)

    def _read_body(self) -> bytes:
        length = self._body_framing()
        if length is None:
            return self._read_chunked(self.server.app.settings.max_request_bytes)
        data = self.rfile.read(length) if length else b""
        if len(data) < length:
            raise _refused(400, f"The request body ended after {len(data)} of {length} bytes.")
        return data

    def _read_chunked(self, limit: int) -> bytes:
        body = bytearray()
        while True:
            line = self.rfile.readline(MAX_CHUNK_LINE + 1)
            size_text = line.split(b";", 1)[0].strip()
            if len(line) > MAX_CHUNK_LINE or not _CHUNK_SIZE.fullmatch(size_text):
                raise _refused(400, "Malformed chunked request body.")
            size = int(size_text, 16)
            if size == 0:
                break
            if len(body) + size > limit:
                raise _too_large(limit)
            chunk = self.rfile.read(size)
            if len(chunk) < size or self.rfile.readline(3) not in (b"\r\n", b"\n"):
                raise _refused(400, "Malformed chunked request body.")
            body += chunk
        for _ in range(MAX_TRAILERS):
            line = self.rfile.readline(MAX_CHUNK_LINE + 1)
            if line in (b"\r\n", b"\n", b""):
                return bytes(body)
        raise _refused(400, "Malformed chunked request body.")

    def _refuse(self, exc: errors.ApiException) -> None:
        """Answers a request whose body cannot be read, then closes the connection."""
        self.close_connection = True
        self._send(exc.http_status, exc.to_body())
        self._discard_rest(self.server.app.settings.max_request_bytes)

    def _discard_rest(self, budget: int) -> None:
        """Reads and drops what the client still sends (at most ``budget`` bytes, briefly)."""
        deadline = time.monotonic() + LINGER_SECONDS
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            while budget > 0 and (left := deadline - time.monotonic()) > 0:
                self.connection.settimeout(left)
                chunk = self.rfile.read1(min(budget, 65536))
                if not chunk:
                    break
                budget -= len(chunk)
        except OSError:
            pass

    def _reset(self) -> None:
        """Drops the connection with a TCP reset and no response bytes."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.rfile.close()
        self.connection.close()


def _too_large(limit: int) -> errors.ApiException:
    return _refused(413, f"Request payload size exceeds the limit: {limit} bytes.")
