"""`vsp schedule` against the emulator: the exact schedule body, duplicates, the reaper notes."""

from __future__ import annotations

import json
import pathlib

import pytest
import requests
import yaml
from click.testing import CliRunner

from vsp.pipelines.cli import main

LOC = ["--project", "test-project", "--location", "us-central1"]
PARENT = "projects/test-project/locations/us-central1"


def write_cron_template(tmp_path, name: str = "nightly", **more_parameters) -> str:
    """A tiny template whose pipeline declares ``project``, ``schedule_cron`` and
    ``more_parameters`` (name -> KFP parameter type, each optional)."""
    parameters = {
        "project": {"parameterType": "STRING"},
        "schedule_cron": {"parameterType": "STRING", "isOptional": True},
    }
    parameters |= {k: {"parameterType": t, "isOptional": True} for k, t in more_parameters.items()}
    spec = {
        "pipelineInfo": {"name": name},
        "root": {"inputDefinitions": {"parameters": parameters}},
        "schemaVersion": "2.1.0",
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


@pytest.fixture
def cron_template(tmp_path):
    """A tiny template whose pipeline declares ``schedule_cron``."""
    return write_cron_template(tmp_path)


def _run(args):
    return CliRunner().invoke(main.main, args)


def _schedule_args(template, *extra):
    return [
        "schedule",
        *LOC,
        "--template",
        template,
        "--pipeline-root",
        "gs://bucket/root",
        "--param",
        "project=test-project",
        "--cron",
        "TZ=Europe/Paris 0 3 * * *",
        *extra,
    ]


def test_schedule_sends_the_exact_body_with_schedule_cron(emulator, cron_template):
    result = _run(_schedule_args(cron_template, "--max-runs", "10", "--label", "team=ml"))
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"created: {PARENT}/schedules/")
    list_entry, create_entry, name_lookup, reaper_lookup = emulator.journal()
    # After the create, the name is looked at again (two creates racing keep one).
    assert (name_lookup["method"], name_lookup["query"]) == (
        list_entry["method"],
        list_entry["query"],
    )
    assert (reaper_lookup["method"], reaper_lookup["query"]) == ("GET", {})
    assert "no active schedule of it exists in us-central1" in result.stderr
    assert "--cron '*/10 * * * *'" in result.stderr  # cadence.REAPER_CRON
    assert (list_entry["method"], list_entry["query"]) == (
        "GET",
        {"filter": 'display_name="nightly"'},
    )
    assert (create_entry["method"], create_entry["path"]) == ("POST", f"/v1/{PARENT}/schedules")
    with open(cron_template) as handle:
        spec = yaml.safe_load(handle)
    assert create_entry["body"] == {
        "displayName": "nightly",
        "cron": "TZ=Europe/Paris 0 3 * * *",
        "maxConcurrentRunCount": 1,
        "maxRunCount": 10,
        "createPipelineJobRequest": {
            "parent": PARENT,
            "pipelineJob": {
                "displayName": "nightly",
                "pipelineSpec": spec,
                "runtimeConfig": {
                    "gcsOutputDirectory": "gs://bucket/root",
                    "parameterValues": {
                        "project": "test-project",
                        "schedule_cron": "TZ=Europe/Paris 0 3 * * *",
                    },
                },
                "labels": {"team": "ml"},
            },
        },
    }


def test_schedule_refuses_a_duplicate_and_replace_swaps_it(emulator, cron_template):
    first = _run(_schedule_args(cron_template))
    assert first.exit_code == 0, first.output
    old_name = first.output.splitlines()[0].removeprefix("created: ")
    again = _run(_schedule_args(cron_template))
    assert again.exit_code == 2
    assert "display_name = 'nightly': a schedule with this name already exists" in again.output
    assert "--replace" in again.output
    replaced = _run(_schedule_args(cron_template, "--replace"))
    assert replaced.exit_code == 0, replaced.output
    new_name = replaced.output.splitlines()[0].removeprefix("created: ")
    calls = [(e["method"], e["path"].rsplit("/", 1)[-1]) for e in emulator.journal()]
    old_id = old_name.rsplit("/", 1)[-1]
    assert calls[-5:] == [
        ("GET", "schedules"),
        ("POST", "schedules"),
        ("DELETE", old_id),  # once the new one exists
        ("GET", "schedules"),  # one schedule of the name?
        ("GET", "schedules"),  # is the reaper scheduled?
    ]
    schedules = requests.get(f"{emulator.base_url}/v1/{PARENT}/schedules").json()["schedules"]
    assert [s["name"] for s in schedules] == [new_name] and new_name != old_name


def test_schedule_dry_run_and_invalid_cron(emulator, template):
    dry = _run(_schedule_args(template, "--dry-run", "--max-concurrent-runs", "2"))
    assert dry.exit_code == 0, dry.output
    body = json.loads(dry.stdout)
    assert body["maxConcurrentRunCount"] == 2
    job = body["createPipelineJobRequest"]["pipelineJob"]
    assert "schedule_cron" not in job["runtimeConfig"]["parameterValues"]
    bad = _run(_schedule_args(template, "--cron", "0 3 * *", "--max-concurrent-runs", "0"))
    assert bad.exit_code == 2
    assert "cron = '0 3 * *'" in bad.output and "max_concurrent_run_count = 0" in bad.output
    assert emulator.journal() == []


def test_schedule_of_a_keeping_pipeline_is_quiet_when_the_reaper_is_scheduled(
    emulator, cron_template
):
    reaper = _run(
        [
            "schedule",
            *LOC,
            "--template",
            "reap-expired-clusters",  # a pipeline shipped with vsp, by name
            "--pipeline-root",
            "gs://bucket/root",
            "--param",
            "project=test-project",
            "--cron",
            "30 * * * *",
        ]
    )
    assert reaper.exit_code == 0, reaper.output
    assert "no active schedule of it exists" not in reaper.stderr  # the reaper itself keeps nothing
    result = _run(_schedule_args(cron_template))
    assert result.exit_code == 0, result.output
    assert "reap-expired-clusters" not in result.stderr
    # A paused reaper deletes nothing: the note comes back (before, any live one silenced it).
    name = reaper.output.splitlines()[0].removeprefix("created: ")
    paused = requests.post(f"http://{emulator.address}/v1/{name}:pause", json={}, timeout=10)
    assert paused.ok, paused.text
    again = _run(_schedule_args(cron_template, "--display-name", "nightly-2"))
    assert again.exit_code == 0, again.output
    assert "no active schedule of it exists in us-central1 (a paused one deletes nothing)" in (
        " ".join(again.stderr.split())
    )


def test_schedule_with_a_pre_warm_names_the_reaper_that_must_read_its_folder(emulator, tmp_path):
    template = write_cron_template(tmp_path, "nightly-warm", teardown_options="STRUCT")
    options = '{"prewarm_margin_minutes": 5, "prewarm_dir": "gs://bucket/vsp prewarm"}'
    reaper_args = ["schedule", *LOC, "--template", "reap-expired-clusters"]
    reaper_args += ["--pipeline-root", "gs://bucket/root", "--param", "project=test-project"]
    first = _run([*reaper_args, "--cron", "*/10 * * * *"])
    assert first.exit_code == 0, first.output
    args = _schedule_args(template, "--param", f"teardown_options={options}")
    result = _run(args)
    assert result.exit_code == 0, result.output
    assert "teardown_options.prewarm_dir is gs://bucket/vsp prewarm, but no" in result.stderr
    assert "--param prewarm_dir='gs://bucket/vsp prewarm' --replace" in result.stderr
    again = _run(
        [*reaper_args, "--cron", "*/10 * * * *", "--replace", "--param",
         "prewarm_dir=gs://bucket/vsp prewarm"]
    )  # fmt: skip
    assert again.exit_code == 0, again.output
    quiet = _run([*args, "--replace"])
    assert quiet.exit_code == 0, quiet.output
    assert "reap-expired-clusters" not in quiet.stderr


def test_schedule_warns_about_folders_every_run_would_share(emulator, tmp_path):
    template = write_cron_template(tmp_path, model_dir="STRING")
    fixed = _run(
        _schedule_args(
            template,
            "--param",
            "model_dir=/gcs/b/model",
            "--display-name",
            "fixed",
            "--dry-run",
        )
    )
    assert (
        "warning: model_dir = '/gcs/b/model' has no {run}, so each run writes its model over "
        "the folder of the versions registered before. Fix: /gcs/b/model/{run} gives every run "
        "its own folder." in fixed.stderr
    )
    per_run = _run(_schedule_args(template, "--param", "model_dir=/gcs/b/model/{run}", "--dry-run"))
    assert per_run.exit_code == 0 and "has no {run}" not in per_run.stderr


def test_a_template_keeping_its_cluster_without_schedule_cron_gets_the_reaper_note(
    emulator, tmp_path
):
    # Before, only a schedule_cron parameter led to the note: an own pipeline ending in
    # keep_cluster was scheduled with no word of the reaper, and its kept cluster never went.
    path = pathlib.Path(write_cron_template(tmp_path, name="mine"))
    spec = yaml.safe_load(path.read_text())
    del spec["root"]["inputDefinitions"]["parameters"]["schedule_cron"]
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump(spec))
    quiet = _run(_schedule_args(str(plain)))
    assert quiet.exit_code == 0, quiet.output
    assert "no active schedule of it exists" not in quiet.stderr  # nothing in it keeps a cluster
    spec["pipelineInfo"]["name"] = "mine-keeping"
    spec["components"] = {"comp-train": {}, "comp-keep-cluster-2": {}}
    path.write_text(yaml.safe_dump(spec))
    result = _run(_schedule_args(str(path)))
    assert result.exit_code == 0, result.output
    assert "no active schedule of it exists in us-central1" in result.stderr
