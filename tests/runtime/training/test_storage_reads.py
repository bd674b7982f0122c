"""Counted Cloud Storage reads through the modelled FUSE cache, and the beacon's comment copy."""

from __future__ import annotations

from vsp.components.runtime.core import polling
from vsp.components.runtime.training import beacon as beacon_lib
from vsp.components.runtime.training import driver, storage_reads
from vsp.components.runtime.training.beacon import Beacon
from vsp.components.runtime.training.storage_reads import StorageReads


def reads_at(tmp_path, monkeypatch, ttl=60.0, negative=5.0):
    monkeypatch.setenv("VSP_GCS_FUSE_ROOT", str(tmp_path / "gcs"))
    clock = polling.FakeClock()
    return StorageReads(ttl, negative, clock=clock), clock


def test_a_read_within_the_ttl_is_free_and_stale(tmp_path, monkeypatch):
    reads, clock = reads_at(tmp_path, monkeypatch)
    obj = tmp_path / "gcs" / "b" / "x.json"
    obj.parent.mkdir(parents=True)
    obj.write_bytes(b"one")
    assert reads.read_bytes("gs://b/x.json", 100) == b"one"
    obj.write_bytes(b"two")
    clock.sleep(59.9)
    assert reads.read_bytes("gs://b/x.json", 100) == b"one"  # the cache's stale copy
    assert (reads.calls, reads.served) == (1, 1)
    clock.sleep(0.1)
    assert reads.read_bytes(str(obj), 100) == b"two"  # the FUSE path is the same object
    assert (reads.calls, reads.served) == (2, 1)


def test_an_absent_object_is_cached_for_the_negative_ttl_only(tmp_path, monkeypatch):
    reads, clock = reads_at(tmp_path, monkeypatch)
    for _ in range(3):
        assert reads.read_bytes("gs://b/none.json", 100) is None
        clock.sleep(2.5)
    assert reads.calls == 2  # at 0 and 5 s; the reads at 2.5 s came from the cache


def test_paths_off_cloud_storage_are_read_directly_and_not_counted(tmp_path, monkeypatch):
    reads, _ = reads_at(tmp_path, monkeypatch)
    local = tmp_path / "local.txt"
    local.write_bytes(b"a")
    assert reads.read_bytes(str(local), 10) == b"a"
    local.write_bytes(b"b")
    assert reads.read_bytes(str(local), 10) == b"b"
    assert (reads.calls, reads.served) == (0, 0)


def test_beacon_reads_are_counted(tmp_path, monkeypatch):
    reads, clock = reads_at(tmp_path, monkeypatch)
    folder = "gs://b/ckpt.beacon"
    path = tmp_path / "gcs" / "b" / "ckpt.beacon" / "vsp-beacon-7.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"job": "7", "restart": 1, "state": "running", "since": 5, "time": 9}')
    assert beacon_lib.read(folder, "7", reads).state == "running"
    assert beacon_lib.read(folder, "7", reads).state == "running"
    assert reads.calls == 1


def test_the_comment_word_round_trips_and_keeps_the_last_word():
    doc = Beacon("7", 2, "exiting", 1767225600.0, 1767225600.0, 143)
    word = beacon_lib.comment_word(doc)
    assert word == "vsp-beacon=exiting:2:1767225600:143"
    comment = f"vsp-run-key=r1 vsp-spec=ab vsp-beacon=running:2:1:null {word}"
    assert beacon_lib.from_comment(comment, "7") == doc
    assert beacon_lib.from_comment("vsp-run-key=r1", "7") is None
    assert beacon_lib.from_comment("vsp-beacon=dancing:1:2:null", "7") is None
    assert beacon_lib.from_comment("vsp-beacon=running:x:2:null", "7") is None


def test_the_plan_is_paced_by_gcsfuses_cache_at_gcs_and_by_none_on_a_local_stand_in(monkeypatch):
    # A local folder in place of Cloud Storage (the emulator's) caches nothing: paced by a
    # 60 s cache that is not there, a local run saw its job's end a minute late.
    monkeypatch.delenv("VSP_GCS_FUSE_ROOT", raising=False)
    assert storage_reads.mount_cache_seconds() == 60.0
    options = driver.component_options(
        spot_price=0, ondemand_price=0, poll_seconds=0.5, timeout_seconds=60,
        gcp_resources_path="", report_path="",
    )  # fmt: skip
    assert options["poll_settings"].read_seconds == 60.0
    monkeypatch.setenv("VSP_GCS_FUSE_ROOT", "/tmp/emulated-gcs")
    assert storage_reads.mount_cache_seconds() == 0.0
    options = driver.component_options(
        spot_price=0, ondemand_price=0, poll_seconds=0.5, timeout_seconds=60,
        gcp_resources_path="", report_path="",
    )  # fmt: skip
    assert options["poll_settings"].read_seconds == 2.5  # 5 x poll_seconds
