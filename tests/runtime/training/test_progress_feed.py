"""The run's progress subscription on the emulator: its requests, what a pull yields, acks."""

from __future__ import annotations

import pytest
import requests

from vsp.components.runtime.core import errors, polling
from vsp.components.runtime.training import progress_feed
from vsp.components.runtime.training.beacon import Beacon

TOPIC = "projects/test-project/topics/progress"


def _calls(emulator) -> list[tuple[str, str]]:
    return [
        (e["method"], e["path"].rsplit("/", 1)[-1])
        for e in emulator.journal()
        if "/subscriptions/" in e["path"]
    ]


def _publish(emulator, tag: str, **fields: str) -> None:
    attributes = {"vsp_run": tag, "job": "7", "restart": "0", "since": "100", "time": "100"}
    attributes.update(fields)
    body = {"messages": [{"attributes": attributes}]}
    answer = requests.post(f"{emulator.base_url}/v1/{TOPIC}:publish", json=body)
    assert answer.status_code == 200


def test_open_creates_the_runs_subscription_and_a_retried_step_reuses_it(emulator):
    feed = progress_feed.ProgressFeed(TOPIC, "run-1", "us-central1")
    feed.open()
    name = f"vsp-progress-{progress_feed.run_tag('run-1')}"
    assert _calls(emulator) == [("PUT", name)]  # the run's own name: the create looks up
    stored = requests.get(f"{emulator.base_url}/v1/{feed.subscription}").json()
    assert (stored["topic"], stored["filter"], stored["ackDeadlineSeconds"]) == (
        TOPIC,
        f'attributes.vsp_run = "{feed.tag}"',
        600,
    )
    assert stored["expirationPolicy"] == {"ttl": "86400s"}
    again = progress_feed.ProgressFeed(TOPIC, "run-1", "us-central1")
    again.open()
    assert _calls(emulator)[2:] == [("PUT", name)]  # after the check above: 409, re-used
    assert [e["status"] for e in emulator.journal() if e["method"] == "PUT"] == [200, 409]
    stored_again = requests.get(f"{emulator.base_url}/v1/{feed.subscription}").json()
    assert stored_again == stored  # untouched
    assert again.environment() == {
        "VSP_PROGRESS_URL": f"http://{emulator.address}/v1/{TOPIC}:publish",
        "VSP_PROGRESS_RUN": feed.tag,
    }
    again.close()
    again.close()  # already gone: fine
    assert requests.get(f"{emulator.base_url}/v1/{feed.subscription}").status_code == 404


def test_a_pull_keeps_the_newest_state_of_each_job_and_only_this_runs(emulator_factory):
    emulator = emulator_factory(pubsub_pull_hold_seconds=0.2)
    clock = polling.FakeClock()
    feed = progress_feed.ProgressFeed(TOPIC, "run-1", "us-central1", clock=clock)
    feed.open()
    _publish(emulator, feed.tag, state="exiting", since="130", time="130", rc="143")
    _publish(emulator, feed.tag, state="notice", since="120", time="120")  # late, older
    _publish(emulator, "someone-else", state="started", job="8")
    _publish(emulator, feed.tag, state="bogus")
    assert feed.pull() is True
    assert feed.latest("7") == Beacon("7", 0, "exiting", 130.0, 130.0, 143)
    assert feed.latest("8") is None
    assert feed.pull() is False  # held 0.2 s, nothing came
    _publish(emulator, feed.tag, state="started", restart="1", since="260", time="260")
    assert feed.pull() is True and feed.latest("7").restart == 1
    assert feed.pulls == 3


def test_acks_are_batched_and_none_is_sent_for_a_subscription_about_to_go(emulator_factory):
    emulator = emulator_factory(pubsub_pull_hold_seconds=0.2)
    clock = polling.FakeClock()
    settings = progress_feed.FeedSettings(pull_seconds=5.0, ack_seconds=300.0)
    feed = progress_feed.ProgressFeed(TOPIC, "run-2", "us-central1", settings, clock=clock)
    feed.open()
    _publish(emulator, feed.tag, state="started")
    feed.pull()
    clock.advance(100)
    _publish(emulator, feed.tag, state="notice", since="200", time="200")
    feed.pull()
    acks = [c for c in _calls(emulator) if c[1].endswith(":acknowledge")]
    assert acks == []  # both wait for one call
    clock.advance(250)
    feed.pull()  # empty, but the oldest read is 350 s old: one ack for both
    acknowledged = [e for e in emulator.journal() if e["path"].endswith(":acknowledge")]
    assert len(acknowledged) == 1 and len(acknowledged[0]["body"]["ackIds"]) == 2
    _publish(emulator, feed.tag, state="exiting", since="300", time="300", rc="0")
    feed.pull()
    feed.close()  # the exit message is read, not acknowledged: deleted with the subscription
    tail = [c[1].rsplit(":", 1)[-1] for c in _calls(emulator)[-2:]]
    assert tail == ["pull", f"vsp-progress-{feed.tag}"]
    assert feed.calls == 1 + 4 + 1 + 1  # put; 4 pulls; 1 ack; delete


def test_a_bad_topic_is_refused_before_any_call():
    with pytest.raises(errors.UserError, match="projects/PROJECT/topics/TOPIC"):
        progress_feed.ProgressFeed("topics/progress", "run-1", "us-central1")


def test_newest_orders_by_run_then_time_entered_then_state():
    a = Beacon("7", 0, "notice", 120.0, 120.0, None)
    b = Beacon("7", 0, "exiting", 120.0, 121.0, 143)
    c = Beacon("7", 1, "started", 100.0, 100.0, None)  # a later run, whatever its clock says
    assert progress_feed.newest(a, b) is b
    assert progress_feed.newest(c, b, a) is c
    same = Beacon("7", 0, "notice", 120.0, 200.0, None)  # a heartbeat copy: first given wins
    assert progress_feed.newest(same, a) is same and progress_feed.newest(None, None) is None


def test_a_topic_the_step_may_not_subscribe_to_is_a_user_error_naming_the_fix(emulator):
    emulator.add_fault(action="status", method="PUT", path="/subscriptions/", http_status=403)
    feed = progress_feed.ProgressFeed(TOPIC, "run-3", "us-central1")
    with pytest.raises(errors.UserError, match=r"roles/pubsub.editor\), or set progress_topic"):
        feed.open()
    assert [c[0] for c in _calls(emulator)] == ["PUT"]  # tried once


def test_the_training_step_refuses_a_bad_progress_topic_before_it_submits(emulator, tmp_path):
    from vsp.components.runtime.steps import train_on_cluster
    from vsp.components.runtime.training import poll_plan
    from vsp.components.runtime.training.backends import slurm

    training = slurm.SlurmTraining(
        command=["true"], working_directory=str(tmp_path), checkpoint_dir=str(tmp_path / "c"),
        model_dir=str(tmp_path / "m"),
    )  # fmt: skip
    with pytest.raises(errors.UserError, match="is not a Pub/Sub topic"):
        train_on_cluster.train_on_cluster(
            project="test-project", location="us-central1", cluster_id="llmtrain",
            training=training, spot_partition="spot", run_key="r",
            poll_settings=poll_plan.PlanSettings(), progress_topic="progress",
        )  # fmt: skip
    assert emulator.journal() == []  # nothing was asked of any service
