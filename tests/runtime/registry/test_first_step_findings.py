"""Values the first step once accepted and a later step refused, after the cluster existed.

Each case is given to ``check_component_params`` with the component's defaults, as the
pipeline's first step receives it, and must be refused there with the field named; the
component that would have failed applies the same rule at its start (``param_rules``).
"""

from __future__ import annotations

import importlib
import inspect
import logging

import pytest

from tests.runtime.registry.test_preflight import component_defaults
from vsp.components import catalog
from vsp.components.runtime.core import errors, param_rules, step
from vsp.components.runtime.steps import check_run_parameters
from vsp.components.runtime.teardown import cadence

RUN = {
    "model_id": "m1",
    "serving_image": "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-5:latest",
    "model_dir": "gs://bucket/run/model",
    "check_teardown": True,
    "idle_price_per_hour": 1.0,
    "provisioning_price_per_hour": 1.0,
    "check_checkpoint_dir": True,
    "check_training": True,
    "command": ["python", "-m", "trainer"],
    "working_directory": "/home/run",
    "gpus_per_node": 8,
    "accelerator_count": 8,
}
OPTION_NAMES = {
    "cluster_options": [
        "boot_disk_size_gb",
        "home_directory_storage",
        "labels",
        "network",
        "ondemand_max_nodes",
        "slurm_config",
        "zone",
    ],
    "training_options": [
        "checkpoint_dir",
        "environment",
        "log_directory",
        "timeout_seconds",
        "warning_seconds",
    ],
    "model_options": ["display_name", "labels"],
    "teardown_options": ["interval_hours", "storage_price_per_hour"],
}


# Where the cluster goes: every run that creates one gives these (the first step refuses it
# otherwise); each check below adds its own cluster_options to them.
PLACE = {
    "network": "default",
    "zone": "us-central1-a",
    "home_directory_storage": "projects/p/locations/us-central1-a/instances/home",
}


def check(**changes):
    params = component_defaults() | RUN | {"option_names": OPTION_NAMES} | changes
    if isinstance(params.get("cluster_options"), dict):
        params["cluster_options"] = PLACE | params["cluster_options"]
    return check_run_parameters.check_component_params(params)


def refused(**changes) -> errors.SpecValidationError:
    with pytest.raises(errors.SpecValidationError) as caught:
        check(**changes)
    return caught.value


def test_the_run_without_changes_passes():
    assert check() is True


@pytest.mark.parametrize("cron", ["0 0 30 2 *", "0 0 31 4 *", "TZ=Europe/Paris 0 0 31 11 *"])
def test_a_cron_naming_a_date_that_never_comes_is_refused_first(cron):
    # CroniterBadDateError at teardown (exit 70) once.
    error = refused(schedule_cron=cron)
    assert error.fields == ["schedule_cron"]
    assert "names a date that never comes" in str(error)


def test_a_cron_on_a_leap_day_passes():
    assert check(schedule_cron="0 0 29 2 *") is True
    assert cadence.parse_cron("0 0 29 2 *")[0] == "0 0 29 2 *"


@pytest.mark.parametrize("hours", [1e15, float("inf"), 87601])
def test_an_interval_beyond_ten_years_is_refused_first(hours):
    # OSError at teardown (exit 70) once.
    error = refused(teardown_options={"interval_hours": hours})
    assert error.fields == ["teardown_options.interval_hours"]
    assert "from 0 to 87600 (ten years)" in str(error)
    assert refused(interval_hours=hours).fields == ["interval_hours"]


def test_more_model_labels_than_fit_beside_the_provenance_labels_are_refused_first():
    # 62 labels were refused only at registration, after training.
    many = {f"k{i}": "v" for i in range(62)}
    error = refused(model_options={"labels": many})
    assert error.fields == ["model_options.labels"]
    assert "holds 62 labels; at most 57 fit" in str(error)
    assert refused(model_labels=many).fields == ["model_labels"]
    assert check(model_labels={f"k{i}": "v" for i in range(57)}) is True


def test_a_line_break_in_the_log_directory_is_refused_first():
    error = refused(training_options={"log_directory": "/home/run/logs\nx"})
    assert error.fields == ["training_options.log_directory"]
    assert "holds a line break or NUL" in str(error)


def test_labels_given_as_a_list_are_refused_first():
    # ValueError (exit 70) in the first step itself once.
    error = refused(model_options={"labels": ["a"]})
    assert error.fields == ["model_options.labels"]
    assert refused(cluster_options={"labels": ["a"]}).fields == ["cluster_options.labels"]


def test_a_slurm_config_that_is_not_a_dict_is_refused_first():
    # AttributeError (exit 70) in create_cluster once.
    error = refused(cluster_options={"slurm_config": "x"})
    assert error.fields == ["cluster_options.slurm_config"]
    assert "is not a dict" in str(error)


def test_a_display_name_or_image_vertex_refuses_is_refused_first():
    # Both were refused only by the Model Registry upload, after training.
    error = refused(
        serving_image="us-docker.pkg.dev/p/r/serve:1\nx",
        model_options={"display_name": "m" * 5000},
    )
    assert error.fields == ["model_options.display_name", "serving_image"]
    assert "has 5000 characters; Vertex AI allows 128." in str(error)
    assert "is not a container image reference" in str(error)
    assert check(model_options={"display_name": "Digits model (nightly)"}) is True


def test_pool_sizes_the_service_refuses_are_refused_first():
    # The emulator once created a cluster of 10**12 nodes with 10**15 GB boot disks.
    error = refused(
        spot_max_nodes=10**12,
        cluster_options={"boot_disk_size_gb": 10**15, "ondemand_max_nodes": 1.5},
    )
    assert error.fields == [
        "cluster_options.boot_disk_size_gb",
        "cluster_options.ondemand_max_nodes",
        "spot_max_nodes",
    ]
    assert "must be a whole number of GB from 0 to 65536" in str(error)
    assert check(cluster_options={"boot_disk_size_gb": 65536.0}) is True


@pytest.mark.parametrize(
    "path",
    ["gs://bucket/run/../../other/model", "/gcs/bucket/run/../model", "gs://bucket/./model"],
)
def test_dot_segments_in_storage_paths_are_refused(path):
    # gs://bucket/run/../../other/model wrote into bucket "other" and registered the literal URI.
    assert refused(model_dir=path).fields == ["model_dir"]
    assert refused(checkpoint_dir=path).fields == ["checkpoint_dir"]
    error = refused(training_options={"checkpoint_dir": path})
    assert error.fields == ["training_options.checkpoint_dir"]
    assert "has a '.' or '..' segment" in str(error)


@pytest.mark.parametrize("path", ["ckpt", "run/ckpt", "/gcs/bucket/c\nd", "gs://b/c\rd"])
def test_a_relative_or_multi_line_checkpoint_dir_is_refused(path):
    assert refused(checkpoint_dir=path).fields == ["checkpoint_dir"]


def test_the_checkpoint_dir_the_step_sets_cannot_come_from_environment():
    error = refused(training_options={"environment": {"VSP_CHECKPOINT_DIR": "/gcs/b/x"}})
    assert error.fields == ["training_options.environment"]
    assert "sets VSP_CHECKPOINT_DIR, which the training step sets" in str(error)
    assert refused(environment={"VSP_MODEL_DIR": "/x"}).fields == ["environment"]
    assert check(environment={"VSP_GCS_FUSE_ROOT": "/mnt", "FOO": "bar"}) is True


def test_group_values_the_first_step_has_no_parameter_for_are_checked_too():
    error = refused(training_options={"timeout_seconds": 0}, teardown_options={})
    assert error.fields == ["timeout_seconds"]
    error = refused(teardown_options={"storage_price_per_hour": float("nan")})
    assert error.fields == ["teardown_options.storage_price_per_hour"]
    assert check(training_options={"timeout_seconds": 3600.0}) is True


def test_every_problem_of_every_group_is_listed_at_once():
    error = refused(
        model_dir="gs://b/../x",
        cluster_options={"slurm_config": "x"},
        training_options={"log_directory": "logs"},
        model_options={"labels": ["a"]},
        teardown_options={"interval_hours": -1},
    )
    assert error.fields == [
        "cluster_options.slurm_config",
        "training_options.log_directory",
        "model_options.labels",
        "teardown_options.interval_hours",
        "model_dir",
    ]


@pytest.mark.parametrize(
    ("component", "params"),
    [
        ("create_cluster", {"slurm_config": "x"}),
        ("train_on_cluster", {"log_directory": "/a\nb"}),
        ("train_on_cluster", {"environment": {"VSP_CHECKPOINT_DIR": "/x"}}),
        ("register_model", {"labels": {f"k{i}": "v" for i in range(58)}}),
        ("register_model", {"model_dir": "gs://b/run/../../other/model"}),
        ("decide_teardown", {"interval_hours": 1e15}),
        ("train_custom_job", {"accelerator_count": -2}),  # dropped without a word
        ("train_custom_job", {"replica_count": 0}),
    ],
)
def test_each_component_applies_the_same_rule_at_its_start(component, params):
    with pytest.raises(errors.SpecValidationError) as caught:
        param_rules.check(component, params)
    assert caught.value.fields == list(params)


@pytest.mark.parametrize(
    "topic",
    ["mytopic", "projects/p/topics/t", "projects/my-proj/topics/goog-runs", "projects/my-proj/x/t"],
)
def test_a_notification_topic_that_is_no_topic_name_is_refused_first(topic):
    # The exit task once sent to it only at the run's end, and logged the failure.
    error = refused(notify_topic=topic)
    assert error.fields == ["notify_topic"]
    assert f"notify_topic = {topic!r}: is not a Pub/Sub topic name." in str(error)


@pytest.mark.parametrize(
    "topic", ["", "projects/my-proj/topics/runs", "projects/a.com:p-1/topics/x~y"]
)
def test_a_notification_topic_name_passes(topic):
    assert check(notify_topic=topic) is True


@pytest.mark.parametrize(
    ("options", "field", "text"),
    [
        ({"gate": "loss <<= 3"}, "model_options.gate", "gate 'loss <<= 3' is not METRIC OP VALUE."),
        ({"gate": 3}, "model_options.gate", "the gate is not a string."),
        ({"metrics_file": "m.json"}, "model_options.metrics_file", "is not gs://BUCKET/PATH"),
    ],
)
def test_the_evaluation_gate_and_its_metrics_file_are_refused_before_training(options, field, text):
    # register_model once parsed them only after the training had run.
    names = {**OPTION_NAMES, "model_options": [*OPTION_NAMES["model_options"], *options]}
    error = refused(model_options=options, option_names=names)
    assert error.fields == [field]
    assert text in str(error)


def test_a_gate_and_metrics_file_that_parse_pass():
    options = {"gate": "final_loss < default", "metrics_file": "gs://bucket/run/metrics.json"}
    names = {**OPTION_NAMES, "model_options": [*OPTION_NAMES["model_options"], *options]}
    assert check(model_options=options, option_names=names) is True


REGISTER_ARGS = {
    "project": "p",
    "location": "us-central1",
    "model_id": "m1",
    "model_dir": "gs://bucket/run/model",
    "serving_image": "us-docker.pkg.dev/p/r/serve:1",
}
CREATE_ARGS = {"project": "p", "location": "us-central1", "cluster_id": "c1"}


@pytest.mark.parametrize(
    ("component", "arguments", "options", "text"),
    [
        # slurm_config='x' and labels=['a'] once failed inside the step (exit 70).
        (
            "create_cluster",
            CREATE_ARGS,
            {"slurm_config": "x"},
            "slurm_config = 'x': is not a dict.",
        ),
        ("create_cluster", CREATE_ARGS, {"labels": ["a"]}, "labels = ['a']: is not a dict."),
        (
            "create_cluster",
            CREATE_ARGS,
            {"boot_disk_size_gb": 10**15},
            "must be a whole number of GB from 0 to 65536",
        ),
        (
            "register_model",
            REGISTER_ARGS,
            {"model_dir": "gs://bucket/run/../../other/model"},
            "model_dir = 'gs://bucket/run/../../other/model': has a '.' or '..' segment.",
        ),
    ],
)
def test_a_step_refuses_them_at_its_start_with_exit_2_before_any_request(
    tmp_path, monkeypatch, caplog, component, arguments, options, text
):
    steps = importlib.import_module(f"vsp.components.runtime.steps.{component}")
    declaration = catalog.declarations()[component]
    defaults = {
        name: parameter.default
        for name, parameter in inspect.signature(declaration).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }
    outputs = {"gcp_resources": str(tmp_path / "gcp_resources")}
    if component == "register_model":
        outputs["model"] = str(tmp_path / "model")
    monkeypatch.setenv("VERTEX_EMULATOR_HOST", "127.0.0.1:9")  # nothing listens: no request
    step.configure_logging()
    monkeypatch.setattr(logging.getLogger("vsp"), "propagate", True)  # to caplog
    with pytest.raises(SystemExit) as caught:
        steps.main(**{**defaults, "options": options}, **arguments, **outputs)
    assert caught.value.code == errors.EXIT_USER_ERROR
    assert text in caplog.text
    assert not (tmp_path / "gcp_resources").exists()


def test_the_rules_constants_match_what_the_steps_add():
    from vsp.components.runtime.core import gcp_labels
    from vsp.components.runtime.steps import register_model
    from vsp.components.runtime.trainer import contract
    from vsp.components.runtime.training import beacon

    most = register_model.provenance_labels(
        job_ids=["1", "2"], preemptions=3, checkpoint_step=4, data_version="d", code_version="c"
    )
    added = {*most, gcp_labels.PIPELINE_RUN}
    assert len(added) == param_rules.MODEL_PROVENANCE_LABELS
    names = {contract.CHECKPOINT_DIR_ENV, contract.MODEL_DIR_ENV, contract.ATTEMPT_ENV}
    assert param_rules.STEP_ENV == names | {contract.RUN_KEY_ENV, beacon.DIR_ENV}


def test_problems_of_every_check_are_reported_at_once():
    # Only the first check's problems were reported (spot_max_nodes here): a user fixed one,
    # ran again and met the next, as many times as there were checks.
    error = refused(
        spot_max_nodes=-1,
        max_preemptions=-1,
        schedule_cron="every day",
        model_id="Not A Model Id",
    )
    assert error.fields[0] == "spot_max_nodes"
    text = str(error)
    assert "max_preemptions" in text and "schedule_cron" in text and "model_id" in text, text
    assert text.startswith("the run's parameter set is invalid (4 problems):"), text


def test_a_check_whose_value_was_reported_is_not_run_again():
    # interval_hours refused by its rule, then again by the teardown inputs as interval_seconds.
    assert refused(interval_hours=1e15, model_id="Bad Id").fields == ["interval_hours", "model_id"]


def test_a_group_setting_a_pipeline_parameter_again_is_refused_with_that_parameter():
    # Before, training_options' command won silently over the command parameter (with neither
    # the pipeline's interpreter mapping nor a warning): the job failed with exit 127.
    error = refused(
        option_names=OPTION_NAMES,
        training_options={"command": ["python", "x.py"], "timeout_secondss": 60},
        teardown_options={"policy": "keep"},
    )
    shown = [str(problem) for problem in error.problems]
    assert shown == [
        "training_options.command = ['python', 'x.py']: is set by the pipeline, not by this "
        "group. Fix: set the pipeline parameter command.",
        "training_options.timeout_secondss = 60: is not known. Fix: did you mean "
        "'timeout_seconds'? Else use one of checkpoint_dir, environment, log_directory, "
        "timeout_seconds, warning_seconds.",
        "teardown_options.policy = 'keep': is set by the pipeline, not by this group. Fix: set "
        "the pipeline parameter teardown_policy.",
    ]


def test_a_cluster_id_create_cluster_would_refuse_is_refused_first():
    # Before, '001' passed the first step (and vsp submit --dry-run); create-cluster then
    # failed three times, and the exit task three more.
    assert [str(p) for p in refused(cluster_id="001").problems] == [
        "cluster_id = '001': Cluster id must be 1-10 chars: a lowercase letter, then lowercase "
        "letters/digits. Fix: Use an id like 'train01'."
    ]
    assert "cannot have '-' in its id" in str(refused(cluster_id="my-run"))
    full = "projects/my-project/locations/us-central1/modelDevelopmentClusters/llmtrain"
    assert [p.fix for p in refused(cluster_id=full).problems] == [
        "Pass the id alone, 'llmtrain' (the last part of the cluster's name)."
    ]
    assert check(cluster_id="train01") is True and check(cluster_id="") is True
