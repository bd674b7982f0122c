"""Measures the emulator's request latency as its state grows (one series per size).

Runs against whichever ``vsp.vertex_emulator`` the interpreter imports, so the same file times
the current tree and an older one (``emulator_scale --baseline-python``, a venv with the older
tree installed); it imports nothing else from the project and runs as a script too::

    python benchmarks/emulator/scale_measure.py --out measured.json [--repeats 30]

Each request goes through ``EmulatorApp.handle`` (ticks, journal, handler, store commit; no
HTTP), in a fresh state directory per size. Clusters: ``N`` clusters are created first (and
become RUNNING), then ``repeats`` creates, gets and first-page lists are timed. Models: one
model gets ``V`` versions first (none at ``V`` = 0: the first timed upload creates it), then
``repeats`` uploads of a new version, gets of a version and first-page ``listVersions``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

PROJECT, LOCATION = "bench-project", "us-central1"
PARENT = f"projects/{PROJECT}/locations/{LOCATION}"
CLUSTERS = f"/v1beta1/{PARENT}/modelDevelopmentClusters"
MODEL = f"{PARENT}/models/bench"
CLUSTER_BODY = {
    "displayName": "bench",
    "labels": {"team": "ml"},
    "network": {
        "network": f"projects/{PROJECT}/global/networks/default",
        "subnetwork": f"projects/{PROJECT}/regions/{LOCATION}/subnetworks/default",
    },
    "nodePools": [
        {
            "id": "login",
            "machineSpec": {"machineType": "n2-standard-8"},
            "scalingSpec": {"minNodeCount": 1, "maxNodeCount": 1},
            "zone": f"{LOCATION}-b",
        },
        {
            "id": "a4",
            "machineSpec": {
                "machineType": "a4-highgpu-8g",
                "acceleratorType": "NVIDIA_B200",
                "acceleratorCount": 8,
            },
            "provisioningModel": "SPOT",
            "scalingSpec": {"minNodeCount": 0, "maxNodeCount": 2},
            "zone": f"{LOCATION}-b",
        },
    ],
    "orchestratorSpec": {
        "slurmSpec": {
            "homeDirectoryStorage": f"projects/{PROJECT}/locations/{LOCATION}-b/instances/home",
            "loginNodePoolId": "login",
            "partitions": [{"id": "a4", "nodePoolIds": ["a4"]}],
        }
    },
}
MODEL_BODY = {
    "displayName": "bench",
    "artifactUri": "gs://bench/model/",
    "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/serve:1"},
    "labels": {"vsp-pipeline-run": "bench"},
}


def _app(state_dir: str) -> Any:
    from vsp.vertex_emulator import app as app_module
    from vsp.vertex_emulator import config

    settings = config.EmulatorSettings(
        provisioning_delay_seconds=0.0,
        update_delay_seconds=0.0,
        delete_delay_seconds=0.0,
        slurm_filesystem_isolation="off",
    )
    return app_module.EmulatorApp(state_dir, settings)


def _call(app: Any, method: str, target: str, body: Any = None) -> dict[str, Any]:
    raw = json.dumps(body).encode() if body is not None else b""
    response = app.handle(method, target, raw)
    if response is None or response.status != 200:
        status = None if response is None else response.status
        raise RuntimeError(f"{method} {target} answered {status}: {getattr(response, 'body', '')}")
    return response.body


def _timed(repeats: int, request: Callable[[int], object]) -> dict[str, float]:
    gc.collect()
    samples = []
    for index in range(repeats):
        start = time.perf_counter()
        request(index)
        samples.append((time.perf_counter() - start) * 1000.0)
    ordered = sorted(samples)
    return {
        "median_ms": statistics.median(samples),
        "p95_ms": ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))],
        "mean_ms": statistics.fmean(samples),
        "samples": len(samples),
    }


def clusters_series(count: int, repeats: int) -> dict[str, Any]:
    """Create, get and list latency with ``count`` clusters already stored."""
    with tempfile.TemporaryDirectory(prefix="vsp-scale-") as state_dir:
        app = _app(state_dir)
        for index in range(count):
            _call(
                app,
                "POST",
                f"{CLUSTERS}?model_development_cluster_id=pop{index:04d}",
                CLUSTER_BODY,
            )
        _call(app, "GET", CLUSTERS)  # completes the last create
        create = _timed(
            repeats,
            lambda i: _call(
                app, "POST", f"{CLUSTERS}?model_development_cluster_id=new{i:04d}", CLUSTER_BODY
            ),
        )
        get = _timed(repeats, lambda i: _call(app, "GET", f"{CLUSTERS}/new{i:04d}"))
        listed = _timed(repeats, lambda i: _call(app, "GET", f"{CLUSTERS}?pageSize=50"))
        return {"size": count, "create": create, "get": get, "list": listed}


def models_series(count: int, repeats: int) -> dict[str, Any]:
    """Upload, get and listVersions latency with ``count`` versions already stored."""
    upload_path = f"/v1/{PARENT}/models:upload"

    def upload(_index: int) -> None:
        if count == 0 and _index == 0:
            _call(app, "POST", upload_path, {"modelId": "bench", "model": MODEL_BODY})
        else:
            _call(app, "POST", upload_path, {"parentModel": MODEL, "model": MODEL_BODY})

    with tempfile.TemporaryDirectory(prefix="vsp-scale-") as state_dir:
        app = _app(state_dir)
        if count:
            _call(app, "POST", upload_path, {"modelId": "bench", "model": MODEL_BODY})
            for _ in range(count - 1):
                _call(app, "POST", upload_path, {"parentModel": MODEL, "model": MODEL_BODY})
        uploaded = _timed(repeats, upload)
        get = _timed(repeats, lambda i: _call(app, "GET", f"/v1/{MODEL}@{count + i + 1}"))
        listed = _timed(repeats, lambda i: _call(app, "GET", f"/v1/{MODEL}:listVersions"))
        return {"size": count, "upload": uploaded, "get": get, "list": listed}


def measure(
    cluster_counts: tuple[int, ...], version_counts: tuple[int, ...], repeats: int
) -> dict[str, Any]:
    """Every series, with the emulator module's location (which tree was measured)."""
    import vsp.vertex_emulator

    return {
        "emulator": vsp.vertex_emulator.__file__,
        "repeats": repeats,
        "clusters": [clusters_series(n, repeats) for n in cluster_counts],
        "models": [models_series(n, repeats) for n in version_counts],
    }


def main(argv: list[str] | None = None) -> int:
    """Measures and writes the JSON (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--repeats", type=int, default=30, help="timed requests per series")
    parser.add_argument("--clusters", default="0,50,200", help="cluster counts, comma-separated")
    parser.add_argument("--versions", default="0,100,1000", help="version counts")
    args = parser.parse_args(argv)
    counts = tuple(int(n) for n in args.clusters.split(","))
    versions = tuple(int(n) for n in args.versions.split(","))
    result = measure(counts, versions, args.repeats)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
