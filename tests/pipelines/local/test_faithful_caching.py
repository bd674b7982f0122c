"""Vertex's execution cache, as kfp.local applies it in the faithful mode, never skips a side
effect of our templates: two identical runs of cluster-lifecycle both create and delete. Forcing
caching on (what ``--enable-caching`` does) makes the second run's delete come from the cache,
the outcome the per-task settings exist to prevent (with a reused cluster it would stay up)."""

from __future__ import annotations

import pytest

from vsp import vertex_emulator
from vsp.pipelines.definitions import catalog
from vsp.pipelines.local import run

FAST = vertex_emulator.EmulatorSettings(
    provisioning_delay_seconds=0.3, delete_delay_seconds=0.1, tick_interval_seconds=0.05
)


def _twice(tmp_path, monkeypatch, enable_caching):
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    arguments = catalog.local_arguments("cluster-lifecycle", str(tmp_path / "shared"))
    results = [
        run.run_local(
            "cluster-lifecycle",
            arguments,
            state_dir=str(tmp_path / "emulator"),
            pipeline_root=str(tmp_path / "outputs"),  # one pipeline root: one shared cache
            settings=FAST,
            enable_caching=enable_caching,
        )
        for _ in range(2)
    ]
    for result in results:
        assert result.succeeded, result.error
        assert result.mode == "faithful"
    return [
        [
            e["method"]
            for e in r.journal
            if e["method"] in ("POST", "DELETE")
            and not e["path"].endswith((":callSlurmRestApi", ":wait"))
        ]
        for r in results
    ]


@pytest.mark.slow
def test_template_settings_repeat_every_side_effect(tmp_path, monkeypatch):
    assert _twice(tmp_path, monkeypatch, None) == [["POST", "DELETE"], ["POST", "DELETE"]]


@pytest.mark.slow
def test_forced_caching_skips_the_delete_of_an_identical_run(tmp_path, monkeypatch):
    first, second = _twice(tmp_path, monkeypatch, True)
    assert first == ["POST", "DELETE"]
    # kfp.local keys create-cluster before the run-name placeholder is filled in, so it is
    # served from the cache too; the delete is what matters: it was not sent.
    assert "DELETE" not in second
