"""``teardown_step``: the decision with run history, keeping, and the exit task's rule."""

from __future__ import annotations

import copy
import datetime

import pytest
import requests

from vsp.components.runtime.cluster import resource
from vsp.components.runtime.core import errors, gcp_labels, rest, step
from vsp.components.runtime.steps import decide_teardown, keep_cluster
from vsp.components.runtime.teardown import exit_task, run_history
from vsp.components.runtime.teardown import inputs as teardown_inputs

PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "kept"
REF = resource.ClusterRef(PROJECT, LOCATION, CLUSTER)
NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
PRICES = {
    "idle_price_per_hour": 1.0,
    "provisioning_minutes": 20.0,
    "provisioning_price_per_hour": 1.0,
    "delay_penalty_per_hour": 10.0,
}


class RecordingClient:
    """Answers the pipelineJobs list with fixed jobs, and records the request."""

    def __init__(self, jobs=None, error=None):
        self.jobs, self.error, self.calls = jobs or [], error, []

    def get(self, path, params=None):
        self.calls.append((path, params))
        if self.error:
            raise self.error
        return {"pipelineJobs": self.jobs}

    list_all = rest.VertexRestClient.list_all  # pages through ``get``, as the real client


class PagedClient(RecordingClient):
    """Answers the pipelineJobs list ``pageSize`` jobs at a time, with page tokens."""

    def get(self, path, params=None):
        self.calls.append((path, dict(params or {})))
        start = int((params or {}).get("pageToken") or 0)
        end = start + int(params["pageSize"])
        page = {"pipelineJobs": self.jobs[start:end]}
        if end < len(self.jobs):
            page["nextPageToken"] = str(end)
        return page


def _job(hours_ago: float, state="PIPELINE_STATE_SUCCEEDED") -> dict:
    return {"state": state, "startTime": _iso(hours_ago)}


def _iso(hours_ago: float) -> str:
    moment = datetime.datetime.fromtimestamp(NOW - hours_ago * 3600, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_history_is_read_past_the_first_page(monkeypatch):
    monkeypatch.setattr(run_history, "HISTORY_PAGE_SIZE", 2)
    jobs = [_job(h) for h in (0.0, 1.0)] + [_job(1.5, "PIPELINE_STATE_CANCELLED"), _job(2.0)]
    client = PagedClient(jobs)
    history = run_history.run_history(client, PROJECT, LOCATION, "p")
    assert history == [NOW - 2 * 3600, NOW - 3600, NOW]
    assert [params.get("pageToken") for _, params in client.calls] == [None, "2"]


def test_history_stops_at_the_most_runs_it_reads(monkeypatch):
    monkeypatch.setattr(run_history, "HISTORY_PAGE_SIZE", 2)
    monkeypatch.setattr(run_history, "HISTORY_MAX_JOBS", 3)
    client = PagedClient([_job(h) for h in (0.0, 1.0, 2.0, 3.0, 4.0)])
    history = run_history.run_history(client, PROJECT, LOCATION, "p")
    assert history == [NOW - 2 * 3600, NOW - 3600, NOW]
    assert len(client.calls) == 2


def test_run_times_list_the_end_of_every_finished_run():
    jobs = [
        {**_job(0.0, "PIPELINE_STATE_RUNNING"), "endTime": _iso(-1.0)},  # running: no end
        {**_job(1.0), "endTime": _iso(0.75)},
        {**_job(2.0, "PIPELINE_STATE_FAILED"), "endTime": _iso(1.5)},
        _job(3.0),  # finished without an end time listed
        {**_job(4.0, "PIPELINE_STATE_CANCELLED"), "endTime": _iso(3.5)},
    ]
    starts, ends = run_history.run_times(RecordingClient(jobs), PROJECT, LOCATION, "p")
    assert starts == [NOW - 3 * 3600, NOW - 2 * 3600, NOW - 3600, NOW]
    assert ends == [NOW - 1.5 * 3600, NOW - 0.75 * 3600]


def test_history_of_hourly_runs_keeps_the_cluster():
    # Five hourly gaps: keeping an hour saves 3.67 - 1 USD on each, clearly more than deleting
    # (three would not be: the next gap may be the first longer than the keep).
    hours = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0)
    jobs = [_job(h) for h in hours] + [_job(0.5, "PIPELINE_STATE_CANCELLED")]
    client = RecordingClient(jobs)
    inputs = teardown_inputs.TeardownInputs(**PRICES, now=NOW)
    weighed, decision = decide_teardown.decide_teardown(
        inputs, client=client, project=PROJECT, location=LOCATION, pipeline_name="p"
    )
    assert client.calls == [
        (
            f"v1/projects/{PROJECT}/locations/{LOCATION}/pipelineJobs",
            {"filter": 'pipeline_name="p"', "orderBy": "create_time desc", "pageSize": 50},
        )
    ]
    assert decision.action == "keep"
    assert decision.next_run == pytest.approx(NOW + 3600)
    assert "median gap 3600 s of 6 earlier runs" in decision.reason
    metrics = decide_teardown.decision_metrics(weighed, decision)
    assert metrics["teardown_keep"] == 1.0
    assert metrics["teardown_input_earlier_runs"] == 6.0
    assert metrics["teardown_input_provisioning_minutes"] == 20.0
    assert metrics["teardown_cost_if_kept"] == pytest.approx(1.0)


def test_a_cron_wins_over_the_history_which_is_still_listed_for_missed_runs():
    client = RecordingClient([_job(h) for h in (0.0, 1.0)])
    inputs = teardown_inputs.TeardownInputs(**PRICES, now=NOW, schedule_cron="0 0 * * 0")
    weighed, decision = decide_teardown.decide_teardown(inputs, client=client, pipeline_name="p")
    assert len(client.calls) == 1
    assert weighed.run_start_times == [NOW - 3600, NOW]
    assert decision.action == "delete"
    assert "cron '0 0 * * 0'" in decision.reason


def test_an_interval_wins_and_nothing_is_listed():
    client = RecordingClient([_job(h) for h in (0.0, 1.0)])
    inputs = teardown_inputs.TeardownInputs(**PRICES, now=NOW, interval_seconds=3600)
    _, decision = decide_teardown.decide_teardown(inputs, client=client, pipeline_name="p")
    assert client.calls == []
    assert decision.action == "keep"


def test_history_that_cannot_be_listed_means_unknown_cadence():
    client = RecordingClient(error=errors.PermissionDeniedError("no", http_status=403))
    _, decision = decide_teardown.decide_teardown(
        teardown_inputs.TeardownInputs(**PRICES, now=NOW), client=client, pipeline_name="p"
    )
    assert decision.action == "delete" and "unknown" in decision.reason


def test_invalid_inputs_fail_before_any_request():
    client = RecordingClient()
    with pytest.raises(errors.UserError, match="schedule_cron"):
        decide_teardown.decide_teardown(
            teardown_inputs.TeardownInputs(**PRICES, schedule_cron="every hour"), client=client
        )
    assert client.calls == []


def test_parse_run_times_accepts_epochs_and_rfc3339():
    assert run_history.parse_run_times([1.5, "1970-01-01T00:00:10Z"]) == [1.5, 10.0]
    with pytest.raises(errors.UserError, match="RFC 3339"):
        run_history.parse_run_times(["yesterday"])


# ----- against the emulator -----


@pytest.fixture
def client(emulator) -> rest.VertexRestClient:
    return rest.VertexRestClient(LOCATION, retry=rest.RetryPolicy(initial=0.01, maximum=0.05))


@pytest.fixture
def cluster(emulator_api, cluster_body):
    body = copy.deepcopy(cluster_body)
    body["labels"] = {**body["labels"], "vsp-managed": "true"}
    return emulator_api.create_running(CLUSTER, body)


def _patches(emulator):
    return [e for e in emulator.journal() if e["method"] == "PATCH"]


def _labels(client):
    return client.get(f"v1beta1/{REF.name}")["labels"]


def _deleter(calls):
    def delete():
        calls.append("delete")
        return True

    return delete


@pytest.mark.slow
def test_keep_labels_the_cluster_with_the_decision(emulator, client, cluster):
    labels = {"vsp-teardown": "keep", "vsp-expires-at": "20270115t091500z"}
    assert keep_cluster.keep(client, REF, labels) is True
    [patch] = _patches(emulator)
    assert patch["query"]["updateMask"] == "labels"
    assert {k: v for k, v in patch["body"]["labels"].items() if k in labels} == labels
    assert _labels(client)["vsp-expires-at"] == "20270115t091500z"


def test_keep_refuses_labels_that_are_not_the_decision(emulator, client, cluster):
    with pytest.raises(errors.UserError, match="not teardown labels"):
        keep_cluster.keep(client, REF, {"vsp-teardown": "keep", "team": "x"})
    assert _patches(emulator) == []


def test_keep_of_a_missing_cluster_is_false(emulator, client):
    assert keep_cluster.keep(client, REF, {"vsp-teardown": "keep"}) is False


def test_after_success_the_exit_task_changes_nothing(emulator, client, cluster):
    before = len(emulator.journal())
    calls = []
    result = exit_task.finalize(
        client, REF, state="SUCCEEDED", failure_keep_minutes=60, delete=_deleter(calls)
    )
    assert result.action == "none" and calls == []
    assert len(emulator.journal()) == before


def test_after_a_cancel_the_exit_task_deletes(emulator, client, cluster):
    calls = []
    result = exit_task.finalize(
        client, REF, state="CANCELLED", failure_keep_minutes=60, delete=_deleter(calls)
    )
    assert result.action == "deleted" and calls == ["delete"]
    assert _patches(emulator) == []


@pytest.mark.slow
def test_after_a_failure_the_cluster_is_kept_for_a_retry_with_an_expiry(emulator, client, cluster):
    calls = []
    result = exit_task.finalize(
        client, REF, state="FAILED", failure_keep_minutes=30, delete=_deleter(calls), now=NOW
    )
    assert result.action == "kept" and calls == []
    labels = _labels(client)
    assert labels["vsp-teardown"] == "retry"
    assert labels["vsp-expires-at"] == gcp_labels.format_label_time(NOW + 1800)
    assert gcp_labels.expired(labels, NOW + 1801) and not gcp_labels.expired(labels, NOW + 1799)


def test_after_a_failure_with_no_retry_window_the_cluster_is_deleted(emulator, client, cluster):
    calls = []
    result = exit_task.finalize(
        client, REF, state="FAILED", failure_keep_minutes=0, delete=_deleter(calls)
    )
    assert result.action == "deleted" and calls == ["delete"]


def test_a_failure_without_a_cluster_keeps_nothing(emulator, client):
    result = exit_task.finalize(
        client, REF, state="FAILED", failure_keep_minutes=30, delete=_deleter([])
    )
    assert result.action == "absent"
    assert [e["method"] for e in emulator.journal()] == ["GET"]


@pytest.mark.parametrize("minutes", [-1, 1e30, float("inf"), float("nan"), "60", True])
def test_a_retry_window_out_of_range_is_a_user_error_before_any_request(emulator, client, minutes):
    with pytest.raises(errors.UserError, match="must be a number of minutes from 0 to 10080"):
        exit_task.finalize(
            client, REF, state="FAILED", failure_keep_minutes=minutes, delete=_deleter([])
        )
    assert emulator.journal() == []


@pytest.mark.parametrize(
    ("given", "read"),
    [
        ("SUCCEEDED", "SUCCEEDED"),
        ("pipeline_state_cancelled", "CANCELLED"),
        ("TASK_STATE_FAILED", "FAILED"),
        ("RUNNING", "FAILED"),
        ("", "FAILED"),
    ],
)
def test_final_states_are_read_tolerantly_and_unknown_ones_take_the_failure_path(given, read):
    assert step.normalize_final_state(given) == read


@pytest.mark.slow
def test_real_delete_through_the_exit_task(emulator, client, cluster, emulator_api):
    from vsp.components.runtime.steps import delete_cluster

    result = exit_task.finalize(
        client,
        REF,
        state="CANCELLED",
        failure_keep_minutes=60,
        delete=lambda: delete_cluster.delete_cluster(
            project=PROJECT, location=LOCATION, cluster_id=CLUSTER, timeout_seconds=30
        ),
    )
    assert result.action == "deleted"
    assert requests.get(emulator_api.clusters_url(CLUSTER)).status_code == 404
