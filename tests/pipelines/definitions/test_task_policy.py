"""Execution caching and retries as compiled, and the caching override of submit and schedule."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from click.testing import CliRunner

from tests.components import compiled_steps
from tests.pipelines.cluster_place import PLACE_PARAM
from vsp.pipelines.cli import main
from vsp.pipelines.local import run
from vsp.pipelines.vertex import caching

LOC = ["--project", "test-project", "--location", "us-central1"]
RETRY = {
    "backoffDuration": "10s",
    "backoffFactor": 3.0,
    "backoffMaxDuration": "3600s",
    "maxRetryCount": 2,
}
# Every container task of every pipeline: (caching on, retried). Only the pure parameter check
# may be served from the cache; the training steps are not retried (see task_policy).
EXPECTED = {
    "cluster_lifecycle": {
        "create-cluster": (False, True),
        "delete-cluster": (False, True),
    },
    "reap_expired_clusters": {"reap-expired-clusters": (False, True)},
    "slurm_spot_training": {
        "check-parameters": (True, False),
        "create-cluster": (False, True),
        "train-on-cluster": (False, False),
        "register-model": (False, True),
        "decide-teardown": (False, True),
        "keep-cluster": (False, True),
        "shrink-cluster": (False, True),
        "delete-cluster": (False, True),
        "finalize-cluster": (False, True),
    },
    "spot_custom_job_training": {
        "check-parameters": (True, False),
        "train-custom-job": (False, False),
        "register-model": (False, True),
        "finalize-custom-jobs": (False, True),
    },
}


def _spec(name: str) -> dict:
    return yaml.safe_load((compiled_steps.COMPILED / "pipelines" / f"{name}.yaml").read_text())


def _policies(spec: dict) -> dict[str, tuple[bool, bool]]:
    executors = {n for n, c in spec["components"].items() if "executorLabel" in c}
    dags = [spec["root"], *spec["components"].values()]
    found = {}
    for dag in dags:
        for task in (dag.get("dag") or {}).get("tasks", {}).values():
            if task["componentRef"]["name"] not in executors:
                assert "cachingOptions" not in task or not task["cachingOptions"]
                continue
            retry = task.get("retryPolicy")
            assert retry in (None, RETRY), retry
            cache = task.get("cachingOptions", {}).get("enableCache", False)
            found[task["taskInfo"]["name"]] = (cache, retry is not None)
    return found


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_compiled_caching_and_retry_of_every_task(name):
    assert _policies(_spec(name)) == EXPECTED[name]


def test_every_compiled_pipeline_is_in_the_table():
    pipelines = sorted(p.stem for p in (compiled_steps.COMPILED / "pipelines").glob("*.yaml"))
    assert pipelines == sorted(EXPECTED)


def test_with_caching_rewrites_every_container_task_and_nothing_else():
    spec = _spec("slurm_spot_training")
    on = caching.with_caching(spec, True)
    assert set(caching.caching_settings(on).values()) == {True}
    assert caching.caching_settings(spec)["decide-teardown"] is False  # copy, not edit
    off = caching.with_caching(spec, False)
    assert set(caching.caching_settings(off).values()) == {False}
    changed = {k for k in spec if spec[k] != off[k]}
    assert changed == {"root", "components"}


@pytest.fixture
def template(tmp_path):
    path = tmp_path / "slurm_spot_training.yaml"
    shutil.copyfile(compiled_steps.COMPILED / "pipelines" / "slurm_spot_training.yaml", path)
    return str(path)


def _submit(template: str, *extra: str):
    args = ["submit", *LOC, "--template", template, "--pipeline-root", "gs://bucket/root"]
    params = ['command=["python3"]', "working_directory=/home/r"]
    params += ['training_options={"checkpoint_dir": "/home/r/c"}']
    params += ["model_dir=gs://b/m", "model_id=m", "serving_image=i", "project=test-project"]
    params.append(PLACE_PARAM)
    for param in params:
        args += ["--param", param]
    return CliRunner().invoke(main.main, [*args, "--dry-run", *extra])


def test_submit_keeps_the_template_settings_by_default(template):
    result = _submit(template)
    assert result.exit_code == 0, result.output
    sent = json.loads(result.stdout)["pipelineSpec"]
    assert sent == _spec("slurm_spot_training")


@pytest.mark.parametrize("flag,value", [("--enable-caching", True), ("--no-enable-caching", False)])
def test_submit_overrides_caching_of_every_task(template, flag, value):
    result = _submit(template, flag)
    assert result.exit_code == 0, result.output
    sent = json.loads(result.stdout)["pipelineSpec"]
    assert set(caching.caching_settings(sent).values()) == {value}
    assert ("skip deleting or labelling its cluster" in result.stderr) is value


def test_caching_override_of_a_registry_template_is_refused():
    uri = "https://us-central1-kfp.pkg.dev/test-project/pipelines/slurm-spot-training/sha256:" + (
        "ab" * 32
    )
    result = CliRunner().invoke(
        main.main,
        ["submit", *LOC, "--template", uri, "--pipeline-root", "gs://bucket/root"]
        + ["--no-enable-caching", "--dry-run"],
    )
    assert result.exit_code == 2, result.output
    assert "enable_caching" in result.output and "Submit the compiled YAML file" in result.output


def test_default_cluster_ids_come_from_the_pipeline_names_and_differ():
    from vsp.components.runtime.cluster import rules_base  # noqa: PLC0415
    from vsp.pipelines.definitions import (
        cluster_lifecycle,
        cluster_tasks,
        slurm_spot_training,  # noqa: PLC0415
    )

    defaults = {}
    for module in (cluster_lifecycle, slurm_spot_training):
        spec = _spec(module.NAME.replace("-", "_"))
        default = spec["root"]["inputDefinitions"]["parameters"]["cluster_id"]["defaultValue"]
        assert default == cluster_tasks.default_cluster_id(module.NAME)
        assert rules_base.SLURM_CLUSTER_ID.fullmatch(default)
        defaults[module.NAME] = default
    assert len(set(defaults.values())) == 2
    assert cluster_tasks.default_cluster_id("2024 pipeline")[0].isalpha()


def test_local_runs_cut_only_the_first_backoff_of_each_retry_policy():
    spec = _spec("slurm_spot_training")
    local = run.with_local_retry_backoff(spec)
    assert _policies(spec) == EXPECTED["slurm_spot_training"]
    policies = [
        task["retryPolicy"]
        for dag in [local["root"], *local["components"].values()]
        for task in (dag.get("dag") or {}).get("tasks", {}).values()
        if "retryPolicy" in task
    ]
    assert len(policies) == 7
    assert all(p == {**RETRY, "backoffDuration": "1s"} for p in policies)
    assert "10s" in json.dumps(spec)  # the template itself is left as compiled


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_no_shipped_template_caches_a_step_with_side_effects(name):
    assert caching.cached_side_effects(_spec(name)) == {}


@pytest.fixture
def own_template(tmp_path):
    """A user's pipeline that leaves kfp's default caching on."""
    from kfp import compiler, dsl  # noqa: PLC0415

    from vsp.components import check_run_parameters, delete_cluster  # noqa: PLC0415

    @dsl.pipeline(name="own-cached")
    def own_cached():
        check = check_run_parameters(
            location="us-central1", model_id="m", serving_image="i", model_dir="gs://b/m"
        )
        delete_cluster(
            project="test-project", location="us-central1", cluster_id="c1",
            pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        ).after(check)  # fmt: skip

    path = tmp_path / "own.yaml"
    compiler.Compiler().compile(own_cached, str(path))
    return str(path)


def test_a_template_caching_a_step_with_side_effects_is_warned_about(own_template):
    spec = yaml.safe_load(open(own_template))
    assert caching.cached_side_effects(spec) == {"delete-cluster": "delete_cluster"}
    args = ["submit", *LOC, "--template", own_template, "--pipeline-root", "gs://bucket/root"]
    args += ["--dry-run"]
    result = CliRunner().invoke(main.main, args)
    assert result.exit_code == 0, result.output
    assert (
        "warning: caching is on for tasks that act on the world: delete-cluster (delete_cluster)."
        in result.stderr
    )
    quiet = CliRunner().invoke(main.main, [*args, "--no-enable-caching"])
    assert quiet.exit_code == 0 and "caching is on" not in quiet.stderr
