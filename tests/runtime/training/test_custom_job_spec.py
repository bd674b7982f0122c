"""The CustomJob request body, field by field, and its validation."""

from __future__ import annotations

import pytest

from vsp.components.runtime.core import errors
from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.training.backends.custom_job import CustomJobBackend, classify
from vsp.components.runtime.training.backends.custom_job_spec import CustomJobTraining
from vsp.components.runtime.training.recovery import Attempt, Target

SPEC = CustomJobTraining(
    display_name="llm",
    base_output_directory="gs://bucket/runs/r1",
    machine_type="a3-highgpu-8g",
    accelerator_type="NVIDIA_H100_80GB",
    accelerator_count=8,
    container_image="us-docker.pkg.dev/p/r/trainer:1",
    command=["python", "-m", "trainer"],
    args=["--steps", "100"],
    env={"SEED": "7"},
    service_account="train@p.iam.gserviceaccount.com",
    timeout_seconds=86400,
    labels={"team": "ml"},
)


def test_spot_request_body_matches_the_customjob_schema():
    body = SPEC.request_body("SPOT", {"vsp-run-key": "k", "vsp-attempt": "0"}, 0, "run/k")
    assert body == {
        "displayName": "llm-0",
        "labels": {"team": "ml", "vsp-run-key": "k", "vsp-attempt": "0"},
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {
                        "machineType": "a3-highgpu-8g",
                        "acceleratorType": "NVIDIA_H100_80GB",
                        "acceleratorCount": 8,
                    },
                    "replicaCount": "1",
                    "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
                    "containerSpec": {
                        "imageUri": "us-docker.pkg.dev/p/r/trainer:1",
                        "command": ["python", "-m", "trainer"],
                        "args": ["--steps", "100"],
                        "env": [
                            {"name": "SEED", "value": "7"},
                            {
                                "name": "VSP_CHECKPOINT_DIR",
                                "value": "gs://bucket/runs/r1/checkpoints/",
                            },
                            {"name": "VSP_MODEL_DIR", "value": "gs://bucket/runs/r1/model/"},
                            {"name": "VSP_ATTEMPT", "value": "0"},
                            {"name": "VSP_RUN_KEY", "value": "run/k"},
                        ],
                    },
                }
            ],
            "scheduling": {
                "strategy": "SPOT",
                "timeout": "86400s",
                "restartJobOnWorkerRestart": False,
            },
            "baseOutputDirectory": {"outputUriPrefix": "gs://bucket/runs/r1"},
            "serviceAccount": "train@p.iam.gserviceaccount.com",
        },
    }


def test_max_wait_duration_is_sent_only_with_flex_start():
    flex = CustomJobTraining(**{**SPEC.__dict__, "max_wait_seconds": 3600})
    assert flex.request_body("FLEX_START", {}, 1)["jobSpec"]["scheduling"]["maxWaitDuration"] == (
        "3600s"
    )
    assert "maxWaitDuration" not in flex.request_body("SPOT", {}, 1)["jobSpec"]["scheduling"]


def test_python_package_spec_body():
    package = CustomJobTraining(
        display_name="p",
        base_output_directory="gs://b/r",
        machine_type="n1-standard-8",
        python_module="trainer.task",
        executor_image="us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-0:latest",
        package_uris=["gs://b/trainer-0.1.tar.gz"],
        args=["--epochs", "3"],
    )
    pool = package.request_body("STANDARD", {}, 0)["jobSpec"]["workerPoolSpecs"][0]
    assert pool["pythonPackageSpec"] == {
        "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-0:latest",
        "packageUris": ["gs://b/trainer-0.1.tar.gz"],
        "pythonModule": "trainer.task",
        "args": ["--epochs", "3"],
        "env": [
            {"name": "VSP_CHECKPOINT_DIR", "value": "gs://b/r/checkpoints/"},
            {"name": "VSP_MODEL_DIR", "value": "gs://b/r/model/"},
            {"name": "VSP_ATTEMPT", "value": "0"},
        ],
    }
    assert "acceleratorType" not in pool["machineSpec"]


def test_the_contract_variables_win_over_the_users_env():
    # The step reads the checkpoint history where it told the trainer to write it.
    spec = CustomJobTraining(
        **{**SPEC.__dict__, "env": {"VSP_CHECKPOINT_DIR": "/elsewhere", "SEED": "7"}}
    )
    pool = spec.request_body("SPOT", {}, 3)["jobSpec"]["workerPoolSpecs"][0]
    env = {e["name"]: e["value"] for e in pool["containerSpec"]["env"]}
    assert env == {
        "SEED": "7",
        "VSP_CHECKPOINT_DIR": "gs://bucket/runs/r1/checkpoints/",
        "VSP_MODEL_DIR": "gs://bucket/runs/r1/model/",
        "VSP_ATTEMPT": "3",
    }


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"base_output_directory": "/local/path"}, "base_output_directory"),
        ({"machine_type": ""}, "machine_type"),
        ({"accelerator_count": 0}, "accelerator_count"),
        ({"accelerator_type": "", "accelerator_count": -2}, "accelerator_count"),  # was dropped
        ({"container_image": ""}, "container_image"),
        ({"python_module": "m"}, "container_image"),
        ({"env": {"BAD-NAME": "1"}}, "env.BAD-NAME"),
        ({"timeout_seconds": 8 * 86400}, "timeout_seconds"),
        ({"labels": {"vsp-run-key": "x"}}, "labels"),
        ({"replica_count": 0}, "replica_count"),
        ({"accelerator_type": "NVIDIA_L4"}, "accelerator_type"),
        ({"accelerator_count": 4}, "accelerator_count"),
        ({"machine_type": "n2-standard-8"}, "accelerator_type"),
        ({"accelerator_type": "", "accelerator_count": 0}, "accelerator_type"),
        ({"machine_type": "a3-higpu-8g"}, "machine_type"),  # alone: not also the accelerators
    ],
)
def test_invalid_specs_are_rejected_naming_the_field(changes, field):
    spec = CustomJobTraining(**{**SPEC.__dict__, **changes})
    with pytest.raises(errors.SpecValidationError) as info:
        spec.validate()
    assert field in info.value.fields
    if field == "machine_type":
        assert info.value.fields == ["machine_type"]


def test_unknown_strategy_is_a_user_error():
    with pytest.raises(errors.UserError, match="not one of"):
        SPEC.request_body("LOW_COST", {}, 0)


@pytest.mark.parametrize(
    ("job", "outcome"),
    [
        ({"state": "JOB_STATE_QUEUED"}, Outcome.PENDING),
        ({"state": "JOB_STATE_PENDING"}, Outcome.PENDING),
        ({"state": "JOB_STATE_RUNNING"}, Outcome.RUNNING),
        ({"state": "JOB_STATE_CANCELLING"}, Outcome.RUNNING),
        ({"state": "JOB_STATE_SUCCEEDED"}, Outcome.SUCCEEDED),
        ({"state": "JOB_STATE_CANCELLED"}, Outcome.CANCELLED),
        ({"state": "JOB_STATE_FAILED", "error": {"code": 8, "message": "x"}}, Outcome.PREEMPTED),
        (
            {"state": "JOB_STATE_FAILED", "error": {"code": 13, "message": "STOCKOUT in zone"}},
            Outcome.PREEMPTED,
        ),
        (
            {"state": "JOB_STATE_FAILED", "error": {"code": 3, "message": "exited with 1"}},
            Outcome.USER_FAILURE,
        ),
    ],
)
def test_job_states_are_classified(job, outcome):
    assert classify(job) is outcome


def test_long_run_keys_keep_distinct_labels():
    from vsp.components.runtime.core import gcp_labels

    a = gcp_labels.unique_value(
        "vsp-spot-training-spot-custom-job-training-2026-12-02-20-11-29-395016"
    )
    b = gcp_labels.unique_value(
        "vsp-spot-training-spot-custom-job-training-2026-12-02-20-11-29-395017"
    )
    assert a != b and len(a) <= 63 and len(b) <= 63
    assert gcp_labels.unique_value("run-1") == "run-1"


def test_a_failed_jobs_log_is_named_by_a_cloud_logging_link():
    # It named the job's REST URL, which holds no log.
    backend = CustomJobBackend(None, "projects/p1/locations/us-central1", SPEC)
    attempt = Attempt("123", Target("spot", spot=True))
    assert backend.log_tail(attempt) == (
        "(the job's log is in Cloud Logging, resource ml_job, job_id 123: "
        "https://console.cloud.google.com/logs/query;query=resource.type%3D%22ml_job%22%0A"
        "resource.labels.job_id%3D%22123%22?project=p1)"
    )
