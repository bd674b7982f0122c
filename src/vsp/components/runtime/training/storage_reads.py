"""The training step's Cloud Storage reads while it watches a job: counted, through a model of
the FUSE mount's cache.

The step reads the job's beacon, the trainer's progress records and the job's log through the
Cloud Storage FUSE mapping (``/gcs/BUCKET/...``). Each read that reaches Cloud Storage is an
API call like a Vertex one, so the step counts them: one call per object read and one per
folder listing (gcsfuse may send a metadata and a content request for one read: the count is of
reads, the unit the step controls). Cloud Storage FUSE keeps what it read in its stat (metadata)
cache for ``ttl-secs``, 60 s by default, and a path it found absent for ``negative-ttl-secs``,
5 s by default (Cloud Storage FUSE configuration file, ``metadata-cache``;
https://cloud.google.com/storage/docs/cloud-storage-fuse/stat-caching). ``StorageReads`` models
that cache: a read of the same path within the TTL is served from the copy of the last fetch,
costs no call and is as stale as that copy. So reading more often than the TTL buys nothing;
the poll plan (``poll_plan``) reads the beacon at most once per TTL.

Paths that are not on Cloud Storage (the cluster's own storage seen from a test, a local folder)
are read directly, uncached and uncounted: they are no Cloud Storage call.

Hand-rolled: a dictionary of (time of fetch, value) with an injectable clock.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

from vsp.components.runtime.core import errors, gcs_paths, polling

# Cloud Storage FUSE's defaults (metadata-cache: ttl-secs, negative-ttl-secs), seconds.
FUSE_TTL_SECONDS = 60.0
FUSE_NEGATIVE_TTL_SECONDS = 5.0


def mount_cache_seconds() -> float:
    """The stat-cache time of the step's Cloud Storage mount, seconds.

    gcsfuse's default at ``/gcs``; 0 when ``$VSP_GCS_FUSE_ROOT`` puts a local folder in its
    place (the emulator's Cloud Storage, a test's), which caches nothing: a plan paced by a cache
    that is not there would only see the job's changes later.
    """
    return 0.0 if os.environ.get(gcs_paths.GCS_FUSE_ROOT_ENV) else FUSE_TTL_SECONDS


def negative_ttl_for(ttl_seconds: float) -> float:
    """The negative TTL beside ``ttl_seconds``, in the ratio of gcsfuse's defaults (5 of 60 s),
    so a time-scaled run keeps the mount's proportions."""
    return ttl_seconds * FUSE_NEGATIVE_TTL_SECONDS / FUSE_TTL_SECONDS


def on_cloud_storage(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a ``gs://`` URI or a path under the Cloud Storage FUSE root."""
    try:
        return gcs_paths.to_gcs_uri(os.fspath(path)) is not None
    except errors.UserError:
        return False


@dataclasses.dataclass
class _Entry:
    at: float
    value: Any
    present: bool


class StorageReads:
    """Counted Cloud Storage reads behind a model of the FUSE stat cache.

    Args:
        ttl_seconds: How long a fetched copy serves later reads of the same key, seconds.
        negative_ttl_seconds: The same for a key found absent.
        clock: Monotonic time source.

    Attributes:
        calls: Reads (and listings) that reached Cloud Storage.
        served: Reads answered from the cache (no call).
    """

    def __init__(
        self,
        ttl_seconds: float = FUSE_TTL_SECONDS,
        negative_ttl_seconds: float = FUSE_NEGATIVE_TTL_SECONDS,
        clock: polling.Clock | None = None,
    ):
        self.ttl_seconds = float(ttl_seconds)
        self.negative_ttl_seconds = float(negative_ttl_seconds)
        self.clock = clock or polling.RealClock()
        self.calls = 0
        self.served = 0
        self._cache: dict[str, _Entry] = {}

    def fetch(self, key: str, read: Callable[[], tuple[Any, int, bool]]) -> Any:
        """The value of ``key``: the cached copy within its TTL, else ``read()``'s.

        Args:
            key: What is read (a path, or a folder and pattern); on Cloud Storage or not.
            read: Reads it now; returns ``(value, calls it made, whether it was present)``.
        """
        if not on_cloud_storage(key.split("\0", 1)[0]):
            return read()[0]
        now = self.clock.now()
        entry = self._cache.get(key)
        if entry is not None:
            ttl = self.ttl_seconds if entry.present else self.negative_ttl_seconds
            if now - entry.at < ttl:
                self.served += 1
                return entry.value
        value, calls, present = read()
        self.calls += calls
        self._cache[key] = _Entry(now, value, present)
        return value

    def read_bytes(self, path: str, limit: int) -> bytes | None:
        """Up to ``limit`` bytes of the object at ``path`` (None when absent or unreadable)."""

        def read() -> tuple[bytes | None, int, bool]:
            try:
                with open(gcs_paths.to_local_path(path), "rb") as handle:
                    return handle.read(limit), 1, True
            except OSError:
                return None, 1, False

        return self.fetch(os.fspath(path), read)
