"""The `vsp` command line against the emulator."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from vsp.components.runtime.core import gcp_labels
from vsp.pipelines.cli import main, run_local

LOC = ["--project", "test-project", "--location", "us-central1"]


@pytest.mark.slow
def test_clusters_list_get_delete(emulator, emulator_api, cluster_body):
    emulator_api.create_running("demo", cluster_body)
    runner = CliRunner()
    listed = runner.invoke(main.main, ["clusters", "list", *LOC])
    assert listed.exit_code == 0, listed.output
    header, row, note = listed.output.splitlines()
    assert header.split("\t") == [
        "name", "state", "idle USD/h", "created", "teardown", "expires", "last run", "last used"
    ]  # fmt: skip
    assert row.split("\t")[:2] == ["demo", "RUNNING"]
    # The fixture's cluster keeps one n2-standard-8 node on demand (login); its a4 Spot pool
    # (no price in the table) scales from 0, so it keeps none and needs no price.
    assert row.split("\t")[2] == "0.39"
    assert note.startswith("idle cost: price table: us-central1 prices as listed on 2025-03-06")
    pricey = {**cluster_body, "node_pools": [dict(p) for p in cluster_body["node_pools"]]}
    pricey["node_pools"][1]["scaling_spec"] = {"min_node_count": 2, "max_node_count": 2}
    emulator_api.create_running("nopr", pricey)
    listed = runner.invoke(main.main, ["clusters", "list", *LOC])
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert [line.split("\t")[:3] for line in lines[1:3]] == [
        ["demo", "RUNNING", "0.39"],
        ["nopr", "RUNNING", "no price"],
    ]
    assert lines[4].startswith("idle cost: nopr: machine type 'a4-highgpu-8g' (SPOT, node pool")
    got = runner.invoke(main.main, ["clusters", "get", *LOC, "demo"])
    assert json.loads(got.output)["clusterStatus"]["state"] == "RUNNING"
    deleted = runner.invoke(main.main, ["clusters", "delete", *LOC, "demo"])
    assert deleted.exit_code == 0 and deleted.output.startswith("deleted:")
    again = runner.invoke(main.main, ["clusters", "delete", *LOC, "demo"])
    assert again.exit_code == 0 and again.output.startswith("already absent:")


def test_clusters_delete_leaves_a_cluster_a_run_uses_unless_forced(
    emulator, emulator_api, cluster_body
):
    # Before, it deleted a cluster under a run's training job (the run died with a 404).
    claim = gcp_labels.lease_key("run-1")
    until = gcp_labels.format_label_time(time.time() + 600)
    emulator_api.create_running("busy", {**cluster_body, "labels": {claim: until}})
    runner = CliRunner()
    kept = runner.invoke(main.main, ["clusters", "delete", *LOC, "busy"])
    assert kept.exit_code == 2, kept.output
    said = " ".join(kept.output.split())
    assert (
        "cluster projects/test-project/locations/us-central1/modelDevelopmentClusters/busy " in said
    )
    assert "is in use (the warning above names by what): not deleted" in said
    assert "add --force to delete it under them" in said
    got = json.loads(runner.invoke(main.main, ["clusters", "get", *LOC, "busy"]).output)
    assert got["labels"]["vsp-teardown"] == "in-use" and got["labels"]["vsp-expires-at"]
    forced = runner.invoke(main.main, ["clusters", "delete", *LOC, "busy", "--force"])
    assert forced.exit_code == 0 and forced.output.startswith("deleted:"), forced.output


def test_bad_param_is_a_user_error_with_exit_code_2():
    result = CliRunner().invoke(main.main, ["run-local", "cluster-lifecycle", "--param", "oops"])
    assert result.exit_code == 2
    assert "--param 'oops' is not KEY=VALUE" in result.output


def test_unknown_pipeline_names_the_known_ones(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main.main, ["run-local", "nope"])
    assert result.exit_code == 2
    assert "unknown pipeline 'nope'" in result.output and "cluster-lifecycle" in result.output
    assert "run_template" not in result.output


def test_a_template_path_is_pointed_to_run_template(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main.main, ["run-local", "mine/my_pipeline.yaml"])
    assert result.exit_code == 2
    assert "unknown pipeline 'mine/my_pipeline.yaml'" in result.output
    assert "vsp.pipelines.local.run.run_template(path, arguments)" in result.output


def test_real_slurm_without_an_address_says_how_to_start_one(monkeypatch):
    monkeypatch.delenv("VSP_REAL_SLURMRESTD", raising=False)
    result = CliRunner().invoke(main.main, ["run-local", "--real-slurm"])
    assert result.exit_code == 2
    assert "--real-slurm needs $VSP_REAL_SLURMRESTD" in result.output
    assert "start.sh DIR" in result.output


def test_a_slurmrestd_that_does_not_answer_is_refused_before_the_run(tmp_path):
    socket_path = tmp_path / "gone.sock"
    result = CliRunner().invoke(main.main, ["run-local", "--slurmrestd", str(socket_path)])
    assert result.exit_code == 2
    assert f"slurmrestd at {socket_path} did not answer GET /slurm/v0.0.42/ping" in result.output
    assert not (tmp_path / ".vsp").exists()
    relative = CliRunner().invoke(
        main.main, ["emulator", "start", "--state-dir", "x", "--slurmrestd", "a.sock"]
    )
    assert relative.exit_code == 2 and "neither an absolute unix socket path" in relative.output


def test_run_local_params_follow_the_template_types_and_are_checked_first(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    typed, definitions, groups = run_local._typed_params(
        "slurm-spot-training", None, ("cluster_id=001", "nodes=2", "training_options={A: b}")
    )
    assert typed == {"cluster_id": "001", "nodes": 2, "training_options": {"A": "b"}}
    assert definitions["cluster_id"]["parameterType"] == "STRING"
    assert "max_preemptions" in groups["training_options"]
    result = CliRunner().invoke(
        main.main,
        ["run-local", "--param", "nodes=abc", "--param", "bogus=1", "--param", "spot_max_nodess=3"],
    )
    assert result.exit_code == 2
    assert "--param nodes = 'abc': The pipeline declares it NUMBER_INTEGER." in result.output
    assert (
        "--param bogus = 1: The pipeline has no such parameter. Fix: Use one of the pipeline's "
        "parameters: "
    ) in result.output
    assert (
        "--param spot_max_nodess = 3: The pipeline has no such parameter. Fix: Did you mean "
        "spot_max_nodes? Use one of"
    ) in result.output
    assert not (tmp_path / ".vsp" / "emulator" / "journal.jsonl").exists()  # no request


def test_an_unreachable_endpoint_fails_fast_with_exit_75(monkeypatch):
    import socket

    from vsp.components.runtime.core import rest
    from vsp.pipelines.cli import common

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("VERTEX_EMULATOR_HOST", f"127.0.0.1:{port}")
    monkeypatch.setattr(
        common, "COMMAND_RETRY", rest.RetryPolicy(initial=0.01, maximum=0.05, deadline=0.3)
    )
    result = CliRunner().invoke(main.main, ["clusters", "list", *LOC])
    assert result.exit_code == 75
    assert "\nerror: GET http://127.0.0.1:" in result.output
    assert f"Fix: check that VERTEX_EMULATOR_HOST=127.0.0.1:{port} is reachable" in result.output
    assert "Traceback" not in result.output


def test_version():
    result = CliRunner().invoke(main.main, ["--version"])
    assert result.exit_code == 0 and result.output == "vsp, version 0.1.0\n"


def test_a_null_inside_a_param_is_refused_naming_where(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        main.main,
        [
            "run-local",
            "--param",
            'training_options={"poll_seconds": null}',
            "--param",
            'command=["python", "train.py", null]',
        ],
    )
    assert result.exit_code == 2, result.output
    assert result.output.splitlines() == [
        "error: the parameter set of slurm-spot-training is invalid (2 problems):",
        "  - --param training_options.poll_seconds = {'poll_seconds': None}: Is null, which no "
        "parameter can carry. Fix: Leave it out to take its default, or give a value.",
        "  - --param command[2] = ['python', 'train.py', None]: Is null, which no parameter can "
        "carry. Fix: Remove that item, or give it a value.",
    ]
    assert not (tmp_path / ".vsp" / "emulator" / "journal.jsonl").exists()  # no request


def test_an_option_group_param_changes_only_the_keys_it_gives(tmp_path):
    from vsp.pipelines.definitions import catalog

    local = catalog.local_arguments("slurm-spot-training", str(tmp_path))
    typed, _, groups = run_local._typed_params(
        "slurm-spot-training", None, ('training_options={"launcher": "srun"}', "cluster_id=c1")
    )
    merged = run_local._over_local_values(local, typed, groups)
    assert merged["training_options"] == {**local["training_options"], "launcher": "srun"}
    assert merged["training_options"]["log_directory"]  # the local wiring is kept
    assert merged["cluster_id"] == "c1"
    assert {k: v for k, v in merged.items() if k not in typed} == {
        k: v for k, v in local.items() if k not in typed
    }


def test_a_map_inside_an_option_group_adds_its_keys_to_the_local_ones(tmp_path):
    from vsp.pipelines.definitions import catalog

    local = catalog.local_arguments("slurm-spot-training", str(tmp_path), nodes=2)
    wired = local["training_options"]["environment"]
    assert wired  # the local run's own variables (the interpreter, gloo's interface)
    typed, _, groups = run_local._typed_params(
        "slurm-spot-training", None, ('training_options={"environment": {"MINE": "1"}}',)
    )
    merged = run_local._over_local_values(local, typed, groups)
    assert merged["training_options"]["environment"] == {**wired, "MINE": "1"}


def test_emulated_preemption_options_with_a_real_slurm_are_warned_about(tmp_path, monkeypatch):
    from vsp.components.runtime.core import errors
    from vsp.pipelines.local import run

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(run_local, "_real_slurmrestd", lambda *_: str(tmp_path / "s.sock"))

    def stop(*_args, **_kwargs):
        raise errors.UserError("stopped before the run")

    monkeypatch.setattr(run, "run_local", stop)
    args = ["run-local", "--real-slurm", "--unannounced-share", "0.5", "--notice-seconds", "2"]
    result = CliRunner().invoke(main.main, args)
    assert result.exit_code == 2 and "stopped before the run" in result.output
    assert (
        "warning: --notice-seconds and --unannounced-share set the emulated Slurm's preemptions; "
        "a real Slurm preempts as --preemption-mechanism says" in result.output
    )
    quiet = CliRunner().invoke(main.main, ["run-local", "--real-slurm"])
    assert "warning" not in quiet.output


def test_cron_for_a_pipeline_without_a_schedule_is_refused_naming_the_one_that_has(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        main.main, ["run-local", "cluster-lifecycle", "--cron", "0 * * * *"]
    )
    assert result.exit_code == 2, result.output
    assert result.output.startswith(
        "error: --cron: cluster-lifecycle has no schedule_cron parameter"
    )
    assert not (tmp_path / ".vsp" / "emulator" / "journal.jsonl").exists()


def test_cron_warns_of_a_given_model_dir_every_scheduled_run_would_share(monkeypatch, tmp_path):
    from vsp.components.runtime.core import errors
    from vsp.pipelines.local import run

    monkeypatch.chdir(tmp_path)

    def stop(*_args, **_kwargs):
        raise errors.UserError("stopped before the run")

    monkeypatch.setattr(run, "local_settings", stop)
    result = CliRunner().invoke(
        main.main,
        [
            "run-local", "slurm-spot-training", "--cron", "0 3 * * *",
            "--param", "model_dir=gs://local-bucket/nightly/model",
        ],
    )  # fmt: skip
    assert "stopped before the run" in result.output
    assert (
        "warning: model_dir = 'gs://local-bucket/nightly/model' has no {run}, so each run writes "
        "its model over the folder of the versions registered before. Fix: "
        "gs://local-bucket/nightly/model/{run} gives every run its own folder."
    ) in " ".join(result.output.split())


def test_every_missing_option_is_named_at_once():
    """click names the first missing required option; a command line missing three took three
    tries. A question ends its own sentence ("?." was printed)."""
    result = CliRunner().invoke(
        main.main, ["submit", "--template", "slurm-spot-training"], prog_name="vsp"
    )
    assert result.exit_code == 2
    assert result.output == (
        "error: Missing options '--project', '--location', '--pipeline-root'. "
        "Fix: see `vsp submit --help`.\n"
    )
    one = CliRunner().invoke(
        main.main, ["schedule", "--project", "p", "--location", "l"], prog_name="vsp"
    )
    assert one.output == (
        "error: Missing options '--template', '--pipeline-root', '--cron'. "
        "Fix: see `vsp schedule --help`.\n"
    )
    single = CliRunner().invoke(
        main.main,
        ["submit", "--project", "p", "--template", "t", "--pipeline-root", "gs://b"],
        prog_name="vsp",
    )
    assert single.output == "error: Missing option '--location'. Fix: see `vsp submit --help`.\n"
    typo = CliRunner().invoke(main.main, ["schedule", "--cronn", "0 3 * * *"], prog_name="vsp")
    assert typo.output == (
        "error: No such option '--cronn'. Did you mean '--cron'? Fix: see `vsp schedule --help`.\n"
    )
