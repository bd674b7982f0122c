"""Input the service refuses gets Google error JSON, never a traceback, HTML or a dropped line.

Requests are raw HTTP on a socket (or ``http.client``), so malformed request lines, headers and
bodies reach the emulator as sent; after each, a new request must still be served.
"""

from __future__ import annotations

import http.client
import json
import socket

import pytest
import requests

from vsp.vertex_emulator import router

PARENT = "projects/test-project/locations/us-central1"
JOBS = f"/v1/{PARENT}/pipelineJobs"
CLUSTERS = f"/v1beta1/{PARENT}/modelDevelopmentClusters?model_development_cluster_id=c1"
HEALTH = "/emulator/v1/health"
URI = "https://us-central1-kfp.pkg.dev/test-project/repo/tiny/latest"
LIMIT = 32 * 1024 * 1024
TOO_DEEP = "Invalid JSON payload received. Message too deep: more than 100 levels of nesting."


def exchange(emulator, data: bytes) -> tuple[int, dict[str, str], bytes]:
    """Sends raw bytes, reads until the server closes; returns (status, headers, body)."""
    host, port = emulator.address.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("iso-8859-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines)}
    return int(status_line.split()[1]), headers, body


def request(method: str, target: str, body: bytes = b"", *headers: str) -> bytes:
    """A raw HTTP/1.1 request that asks the server to close the connection after it."""
    lines = [f"{method} {target} HTTP/1.1", "Host: emulator", "Connection: close", *headers]
    if body and not any(
        h.lower().startswith(("content-length", "transfer-encoding")) for h in headers
    ):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("iso-8859-1") + body


def google_error(headers: dict[str, str], body: bytes) -> dict:
    """The ``error`` of a Google error JSON answer (checks the content type and shape)."""
    assert headers["content-type"].startswith("application/json"), headers
    assert int(headers["content-length"]) == len(body)
    error = json.loads(body)["error"]
    assert set(error) <= {"code", "message", "status", "details"}
    return error


def assert_serving(emulator) -> None:
    response = requests.get(f"{emulator.base_url}{HEALTH}", timeout=5)
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def job_body(**parameters) -> dict:
    return {
        "displayName": "tiny",
        "templateUri": URI,
        "runtimeConfig": {"gcsOutputDirectory": "gs://bucket/root", "parameterValues": parameters},
    }


def nested(levels: int) -> object:
    value: object = "leaf"
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("raw", "code", "status", "message"),
    [
        (b"GET / HTTX/1.1\r\n\r\n", 400, "INVALID_ARGUMENT", "Bad request version ('HTTX/1.1')"),
        (b"GARBAGE\r\n\r\n", 400, "INVALID_ARGUMENT", "Bad request syntax ('GARBAGE')"),
        (b"GET / HTTP/2.0\r\n\r\n", 505, "UNIMPLEMENTED", "Invalid HTTP version (2.0)"),
        (
            b"BREW /v1/pot HTTP/1.1\r\nHost: e\r\n\r\n",
            501,
            "UNIMPLEMENTED",
            "Unsupported method ('BREW')",
        ),
        (b"HEAD / HTTP/1.1\r\nHost: e\r\n\r\n", 501, "UNIMPLEMENTED", None),
        (
            b"GET / HTTP/1.1\r\n" + b"X-Many: 1\r\n" * 101 + b"\r\n",
            431,
            "INVALID_ARGUMENT",
            "Too many headers",
        ),
        (
            b"GET / HTTP/1.1\r\nX-Long: " + b"a" * 70000 + b"\r\n\r\n",
            431,
            "INVALID_ARGUMENT",
            "Line too long",
        ),
        (
            b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n",
            414,
            "INVALID_ARGUMENT",
            "Request-URI Too Long",
        ),
    ],
    ids=["version", "syntax", "http2", "method", "head", "headers", "header-line", "uri"],
)
def test_protocol_errors_are_google_json_not_html(emulator, raw, code, status, message):
    got, headers, body = exchange(emulator, raw)
    assert got == code
    assert headers["connection"] == "close"
    if raw.startswith(b"HEAD"):
        assert headers["content-type"].startswith("application/json")
        assert body == b""  # a HEAD answer has no body, only its headers
    else:
        assert google_error(headers, body) == {"code": code, "message": message, "status": status}
    assert_serving(emulator)


def test_huge_content_length_is_413_without_reading_the_body(emulator):
    raw = f"POST {JOBS} HTTP/1.1\r\nHost: e\r\nContent-Length: {10**12}\r\n\r\n".encode()
    code, headers, body = exchange(emulator, raw)
    assert code == 413
    assert headers["connection"] == "close"
    assert google_error(headers, body) == {
        "code": 413,
        "message": f"Request payload size exceeds the limit: {LIMIT} bytes.",
        "status": "INVALID_ARGUMENT",
    }
    assert_serving(emulator)


def test_expect_continue_with_an_oversized_body_is_refused_before_it_is_sent(emulator):
    raw = request("POST", JOBS, b"", f"Content-Length: {LIMIT + 1}", "Expect: 100-continue")
    code, headers, body = exchange(emulator, raw)
    assert code == 413  # no "100 Continue" first
    assert google_error(headers, body)["code"] == 413
    assert_serving(emulator)


def test_the_limit_is_a_setting_and_a_body_over_it_is_refused(emulator):
    emulator.update_settings(max_request_bytes=1000)
    host, port = emulator.address.split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("POST", JOBS, body=json.dumps(job_body(pad="x" * 1000)))
    response = connection.getresponse()
    error = google_error({k.lower(): v for k, v in response.getheaders()}, response.read())
    connection.close()
    assert (response.status, error["message"]) == (
        413,
        "Request payload size exceeds the limit: 1000 bytes.",
    )
    small = requests.post(f"{emulator.base_url}{JOBS}", json=job_body(), timeout=5)
    assert small.status_code == 200, small.text
    assert_serving(emulator)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-5", "Invalid Content-Length '-5'."),
        ("abc", "Invalid Content-Length 'abc'."),
        ("0x10", "Invalid Content-Length '0x10'."),
    ],
)
def test_a_bad_content_length_is_400_and_closes(emulator, value, message):
    code, headers, body = exchange(
        emulator, request("GET", HEALTH, b"", f"Content-Length: {value}")
    )
    assert code == 400
    assert headers["connection"] == "close"
    assert google_error(headers, body) == {
        "code": 400,
        "message": message,
        "status": "INVALID_ARGUMENT",
    }
    assert_serving(emulator)


def test_conflicting_content_lengths_are_400(emulator):
    raw = request("POST", JOBS, b"{}", "Content-Length: 2", "Content-Length: 3")
    code, headers, body = exchange(emulator, raw)
    assert (code, google_error(headers, body)["message"]) == (
        400,
        "The request has conflicting Content-Length headers.",
    )
    assert_serving(emulator)


def test_a_chunked_body_is_read_as_the_body(emulator):
    payload = json.dumps(job_body()).encode()
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(payload), payload)
    code, headers, body = exchange(
        emulator, request("POST", JOBS, chunked, "Transfer-Encoding: chunked")
    )
    assert code == 200, body
    assert json.loads(body)["displayName"] == "tiny"
    raw = request("POST", JOBS, b"{}", "Transfer-Encoding: gzip")
    code, headers, body = exchange(emulator, raw)
    assert (code, google_error(headers, body)["status"]) == (501, "UNIMPLEMENTED")
    assert_serving(emulator)


@pytest.mark.parametrize("levels", [98, 5000, 200000])
def test_nesting_beyond_100_levels_is_invalid_argument(emulator, levels):
    # The job object, runtimeConfig and parameterValues are 3 levels; 97 more make 100.
    accepted = json.dumps(job_body(deep=nested(97))).encode()
    code, headers, answer = exchange(emulator, request("POST", JOBS, accepted))
    assert code == 200, answer
    extra = levels - 97
    body = accepted.replace(b'"leaf"', b"[" * extra + b'"leaf"' + b"]" * extra)
    code, headers, answer = exchange(emulator, request("POST", JOBS, body))
    assert code == 400
    error = google_error(headers, answer)
    assert (error["status"], error["message"]) == ("INVALID_ARGUMENT", TOO_DEEP)
    assert_serving(emulator)


@pytest.mark.parametrize(
    ("literal", "message"),
    [
        (b"NaN", "NaN is not a JSON value (no NaN or Infinity)."),
        (b"Infinity", "Infinity is not a JSON value (no NaN or Infinity)."),
        (b"-Infinity", "-Infinity is not a JSON value (no NaN or Infinity)."),
        (b"1e999", "Number 1e999 is out of range."),
        (b"-1e400", "Number -1e400 is out of range."),
        (b"9" * 5000, "Number " + "9" * 40 + "... is out of range."),
        (b'"\\ud800"', "Invalid string: a lone surrogate escape."),
        (b'"\xff"', "Invalid UTF-8 at byte {offset}."),
    ],
    ids=["nan", "inf", "-inf", "1e999", "-1e400", "5000-digits", "surrogate", "not-utf8"],
)
def test_json_the_service_refuses_is_invalid_argument(emulator, literal, message):
    body = json.dumps(job_body(x="PLACEHOLDER")).encode().replace(b'"PLACEHOLDER"', literal)
    code, headers, answer = exchange(emulator, request("POST", JOBS, body))
    assert code == 400
    error = google_error(headers, answer)
    message = message.format(offset=body.find(b"\xff"))
    assert error["message"] == f"Invalid JSON payload received. {message}"
    assert error["status"] == "INVALID_ARGUMENT"
    listed = requests.get(f"{emulator.base_url}{JOBS}", timeout=5)
    assert listed.status_code == 200 and listed.json() == {}  # nothing was stored
    assert_serving(emulator)
    # Big but finite numbers are fine, and come back as standard JSON.
    body = json.dumps(job_body(big=-1e308, wide=10**300)).encode()
    code, headers, answer = exchange(emulator, request("POST", JOBS, body))
    assert code == 200, answer
    values = json.loads(answer)["runtimeConfig"]["parameterValues"]
    assert values == {"big": -1e308, "wide": 10**300}


def test_a_non_finite_value_in_a_response_is_an_internal_error(emulator):
    def broken(request: router.Request) -> router.Response:
        return router.Response({"value": float("inf")})

    emulator.app.router.add_api("GET", "broken", broken)
    code, headers, body = exchange(emulator, request("GET", "/v1/broken"))
    assert code == 500
    error = google_error(headers, body)
    assert error["status"] == "INTERNAL"
    assert b"Infinity" not in body
    assert error["message"].startswith("Emulator bug: the response is not standard JSON")
    assert_serving(emulator)


def test_bad_json_on_a_control_route_is_invalid_argument(emulator):
    raw = request("POST", "/emulator/v1/faults", b'{"action": NaN}')
    code, headers, body = exchange(emulator, raw)
    assert code == 400
    assert google_error(headers, body)["message"] == (
        "Invalid JSON payload received. NaN is not a JSON value (no NaN or Infinity)."
    )
    assert emulator.faults() == []
    assert_serving(emulator)
