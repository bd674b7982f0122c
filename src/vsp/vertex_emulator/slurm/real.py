"""A real slurmrestd behind the emulator's Slurm Job API (the ``slurmrestd`` setting).

With the setting, ``:callSlurmRestApi`` of every RUNNING cluster is forwarded unchanged (method,
path with its query string, JSON body) to one real slurmrestd, and its answer comes back in the
documented wrapper ``{"status": <HTTP status>, "body": "<Slurm JSON>"}``. The job scripts then
run as real Slurm jobs on that Slurm's nodes (whose filesystem is this machine's: the
per-cluster filesystems of the emulated Slurm do not apply).

Addresses: a unix socket path (``/tmp/s/slurmrestd.sock``, or ``unix:/...``; rest_auth/local,
no headers) or ``http://127.0.0.1:PORT`` (rest_auth/jwt: the token is read from
``$VSP_REAL_SLURMRESTD_TOKEN`` at each call, never stored in the settings and never logged; the
user from ``$VSP_REAL_SLURMRESTD_USER``, default ``root``).

The transport is ``http.client`` with a unix-socket connection: the standard library has no
HTTP-over-unix-socket client, and the few lines here avoid a dependency for the emulator.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import urllib.parse
from typing import Any

TOKEN_ENV = "VSP_REAL_SLURMRESTD_TOKEN"
USER_ENV = "VSP_REAL_SLURMRESTD_USER"
ADDRESS_ENV = "VSP_REAL_SLURMRESTD"
TIMEOUT_SECONDS = 30.0
# How injected Spot preemptions are made on the real Slurm (see ``real_preemption``).
PREEMPTION_MECHANISMS = ("partition", "requeue", "node_down")


class SlurmrestdUnavailable(Exception):
    """The real slurmrestd could not be reached (connection refused, timeout, socket gone)."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.socket_path)
        self.sock = sock


def check_address(address: str) -> str:
    """The address in canonical form (a socket path or an http URL).

    Raises:
        ValueError: Neither an absolute socket path nor an ``http://host:port`` URL.
    """
    text = address.strip()
    if text.startswith("unix:"):
        text = text[len("unix:") :]
    if text.startswith("http://"):
        parts = urllib.parse.urlsplit(text)
        if not parts.hostname or parts.path not in ("", "/"):
            raise ValueError(f"slurmrestd URL {address!r}: expected http://HOST:PORT")
        return f"http://{parts.netloc}"
    if not os.path.isabs(text):
        raise ValueError(
            f"slurmrestd address {address!r} is neither an absolute unix socket path nor an "
            "http://HOST:PORT URL (start.sh writes both to DIR/env.sh: VSP_REAL_SLURMRESTD and "
            "VSP_REAL_SLURMRESTD_URL)."
        )
    return text


class RealSlurmrestd:
    """One real slurmrestd.

    Args:
        address: Unix socket path or ``http://HOST:PORT`` (see the module docstring).
        timeout: Seconds to wait for an answer.
    """

    def __init__(self, address: str, timeout: float = TIMEOUT_SECONDS):
        self.address = check_address(address)
        self.timeout = timeout

    def _connection(self) -> http.client.HTTPConnection:
        if self.address.startswith("http://"):
            parts = urllib.parse.urlsplit(self.address)
            return http.client.HTTPConnection(parts.netloc, timeout=self.timeout)
        return _UnixConnection(self.address, self.timeout)

    def _headers(self, body: bytes | None) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self.address.startswith("http://"):
            token = os.environ.get(TOKEN_ENV, "")
            if token:
                headers["X-SLURM-USER-NAME"] = os.environ.get(USER_ENV, "root")
                headers["X-SLURM-USER-TOKEN"] = token
        return headers

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, str]:
        """Sends one request; returns (HTTP status, body text).

        Raises:
            SlurmrestdUnavailable: No connection or no answer in time.
        """
        data = None if body is None else json.dumps(body).encode("utf-8")
        connection = self._connection()
        try:
            connection.request(method, path, body=data, headers=self._headers(data))
            answer = connection.getresponse()
            return answer.status, answer.read().decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as exc:
            raise SlurmrestdUnavailable(
                f"slurmrestd at {self.address} did not answer {method} {path}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        finally:
            connection.close()

    def get_json(self, path: str) -> dict[str, Any]:
        """A GET whose JSON answer is returned ({} when it is not a JSON object).

        Raises:
            SlurmrestdUnavailable: No connection or no answer in time.
        """
        _, text = self.call("GET", path)
        try:
            payload = json.loads(text)
        except ValueError:
            return {}
        return payload if isinstance(payload, dict) else {}
