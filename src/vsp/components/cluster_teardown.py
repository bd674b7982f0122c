"""KFP components: the end of a cluster's run (decide, keep, shrink, exit task, reap).

Declarations (``vsp.components.declare``): each body hands its parameters to
``vsp.components.runtime.steps.<component>.main``.
"""

from typing import NamedTuple

from kfp import dsl

from vsp.components.declare import component


@component
def decide_teardown(
    project: str,
    location: str,
    cluster_id: str,
    metrics: dsl.Output[dsl.Metrics],
    report: dsl.Output[dsl.HTML],
    policy: str = "auto",
    schedule_cron: str = "",
    interval_hours: float = 0.0,
    idle_price_per_hour: float = 0.0,
    provisioning_minutes: float = 20.0,
    provisioning_price_per_hour: float = 0.0,
    delay_penalty_per_hour: float = 10.0,
    pipeline_name: str = "",
    expiry_slack_fraction: float = 0.25,
    price_file: str = "",
    storage_price_per_hour: float = 0.0,
    shrunk_price_per_hour: float = 0.0,
    scale_up_minutes: float = 10.0,
    prewarm_margin_minutes: float = 0.0,
    prewarm_dir: str = "",
    pipeline_run: str = "",
    options: dict = {},  # noqa: B006
) -> NamedTuple("Outputs", [("action", str), ("reason", str), ("summary", str), ("labels", dict)]):
    """Decides whether to keep the training cluster warm, shrink it, or delete it now.

    Ski rental with a middle choice: keeping costs ``idle_price_per_hour`` (by default what the
    cluster's pools cost per hour, from the price table) for every idle hour until the next
    run; shrinking (GPU pools scaled to no nodes, login node and storage kept) costs
    ``shrunk_price_per_hour`` per idle hour plus a scale-up of ``scale_up_minutes`` for the
    next run; deleting costs a re-creation (``provisioning_minutes`` at
    ``provisioning_price_per_hour`` plus ``delay_penalty_per_hour`` for the wait). With
    ``policy`` ``auto`` the cheapest choice for the expected idle time wins; with no known
    cadence the cluster is deleted. The next run is predicted from ``schedule_cron``, else
    ``interval_hours``, else the median gap between earlier runs of ``pipeline_name`` listed
    from Vertex AI Pipelines. A kept cluster gets an expiry (next run plus slack) after which
    ``reap_expired_clusters`` deletes it. With a cron and ``prewarm_margin_minutes``, deleting
    now and having ``reap_expired_clusters`` re-create the cluster to be ready before the next
    tick is weighed too (it pays the creation but no waiting).

    Args:
        project: Google Cloud project id.
        location: Vertex AI region of the cluster.
        cluster_id: Id of the training cluster.
        metrics: Output: the decision (teardown_keep 0/1), the expected costs (USD),
            break-even and idle time (s), next run and expiry (epoch s), and the
            inputs weighed (teardown_input_*).
        report: Output: HTML with the numbers and a cost chart of both choices.
        policy: ``auto`` (cost rule), ``keep``, ``shrink`` or ``delete`` (override the rule).
        schedule_cron: The schedule's cron, e.g. ``0 * * * *`` or ``TZ=Europe/Paris 0 3 * * *``
            ('' = no schedule; ``vsp schedule`` fills it in).
        interval_hours: Expected hours between runs when there is no cron (0 = unknown).
        idle_price_per_hour: What the cluster costs per hour while idle, USD/hour; 0 = price
            the cluster's node pools (nodes kept x the machine's price for its provisioning
            model) from the project's price table and ``price_file``.
        provisioning_minutes: How long creating the cluster takes, minutes.
        provisioning_price_per_hour: What the cluster costs per hour while provisioning,
            USD/hour; 0 = the same pools' price per hour.
        delay_penalty_per_hour: What one hour of waiting for a new cluster costs the next run,
            USD/hour.
        pipeline_name: Name of this pipeline, to measure the cadence of its earlier runs
            (with a cron: how often they were missed or started late).
        expiry_slack_fraction: Slack after a predicted run before a kept cluster expires, as a
            fraction of the run interval (at least 10 minutes); the expiry is
            max(last predicted run within the break-even time + slack, now + break-even time).
        price_file: JSON or YAML prices, USD per node-hour by machine type and provisioning
            model, merged over the price table: a local path or gs://BUCKET/PATH ('' = the
            table alone).
        storage_price_per_hour: Home storage cost added to a derived idle price, USD/hour.
        shrunk_price_per_hour: What the cluster costs per hour with its GPU pools at no nodes,
            USD/hour; 0 = the login pool's price plus ``storage_price_per_hour`` when the idle
            price is derived from the cluster (with an explicit idle price, 0 = shrinking is
            not weighed).
        scale_up_minutes: How long scaling a shrunk cluster's GPU pools back up takes, minutes.
        prewarm_margin_minutes: With a cron, minutes before the next tick by which a cluster
            deleted now should be ready again, re-created by ``reap_expired_clusters`` from
            ``prewarm_dir`` (0 = never pre-warm). The creation starts at the reaper's last
            10-minute tick before the next tick minus this margin and ``provisioning_minutes``.
        prewarm_dir: Folder of pre-warm requests, ``gs://BUCKET/PATH`` (or a local path), the
            same as the reaper's; needed when ``prewarm_margin_minutes`` > 0.
        pipeline_run: This run's id, recorded in a pre-warm request ('' = none).
        options: More of this component's parameters by name, for example
            ``{"interval_hours": 24}``; a value here wins over the parameter of that name,
            and a name the component does not have is refused. It lets a pipeline offer
            rarely set parameters as one field.

    Returns:
        action: ``keep``, ``shrink`` or ``delete``.
        reason: The decision in one sentence, with the numbers.
        summary: The decision in two short lines: what and why, then the costs weighed (USD).
        labels: Cluster labels for ``keep_cluster`` and ``shrink_cluster`` (``vsp-teardown``,
            ``vsp-expires-at``).
    """
    params = dict(locals())  # the parameters, before the import below binds a name
    from vsp.components.runtime.steps import decide_teardown

    return decide_teardown.main(**params)


@component
def keep_cluster(
    project: str, location: str, cluster_id: str, labels: dict, pipeline_run: str = ""
) -> bool:
    """Keeps the training cluster warm: labels it with the decision and its expiry time.

    The next run that reuses the cluster removes the expiry; ``reap_expired_clusters`` (or
    ``vsp clusters reap``) deletes the cluster once the expiry has passed. This run's claim on
    the cluster ends, so that a later run may delete it at once.

    Args:
        project: Google Cloud project id.
        location: Vertex AI region of the cluster.
        cluster_id: Id of the training cluster.
        labels: The labels from ``decide_teardown`` (``vsp-teardown``, ``vsp-expires-at``).
        pipeline_run: This pipeline run's unique id (its claim on the cluster ends here).

    Returns:
        True when the cluster exists and is labelled; False when it is already gone.
    """
    params = dict(locals())  # the parameters, before the import below binds a name
    from vsp.components.runtime.steps import keep_cluster

    return keep_cluster.main(**params)


@component
def shrink_cluster(
    project: str, location: str, cluster_id: str, labels: dict, pipeline_run: str = ""
) -> str:
    """Shrinks the training cluster: its GPU pools go to no nodes until the next run.

    The controller, login node and home storage stay, so the next run waits only for the GPU
    nodes (``create_cluster`` scales the pools back up). The expiry labels are set first; if the
    service refuses them, or refuses a pool of no nodes, the cluster is deleted instead. A
    cluster whose Slurm jobs belong to another run is kept whole, with the expiry.

    Args:
        project: Google Cloud project id.
        location: Vertex AI region of the cluster.
        cluster_id: Id of the training cluster.
        labels: The labels from ``decide_teardown`` (``vsp-teardown=shrink``,
            ``vsp-expires-at``).
        pipeline_run: This pipeline run's unique id (its own jobs do not count as another run's).

    Returns:
        ``shrunk``, ``kept whole``, ``absent``, ``deleted`` or ``in-use``.
    """
    params = dict(locals())  # the parameters, before the import below binds a name
    from vsp.components.runtime.steps import shrink_cluster

    return shrink_cluster.main(**params)


@component
def finalize_cluster(
    project: str,
    location: str,
    cluster_id: str,
    status: dsl.PipelineTaskFinalStatus,
    failure_keep_minutes: float = 60.0,
    timeout_seconds: float = 3600.0,
    pipeline_run: str = "",
    notify_topic: str = "",
    model_id: str = "",
) -> NamedTuple("Outputs", [("action", str), ("summary", str)]):
    """The exit task: makes sure no cluster is left running without an owner.

    Runs however the run ended. After a success the teardown decision has already acted, so it
    changes nothing. After a cancel it deletes the cluster. After a failure it keeps the
    cluster ``failure_keep_minutes`` with an expiry label, so retrying the failed run finds it
    warm (training resumes from the checkpoint); ``reap_expired_clusters`` deletes it if nobody
    retries. With ``failure_keep_minutes`` 0 a failure deletes the cluster.

    Args:
        project: Google Cloud project id.
        location: Vertex AI region of the cluster.
        cluster_id: Id of the training cluster.
        status: Final status of the run's tasks (filled in by the pipeline).
        failure_keep_minutes: Minutes to keep the cluster after a failure (0 = delete).
        timeout_seconds: Seconds to wait for a deletion, and to keep retrying a failed
            deletion or label update before leaving an expiry for the reaper.
        pipeline_run: This pipeline run (the pipeline passes the run's unique id); a
            deletion skips a cluster on which another run still has unfinished Slurm jobs.
        notify_topic: Pub/Sub topic ``projects/P/topics/T`` that gets one message when the
            run ends: its final state and error, the cluster's fate (kept until when, idle
            USD/hour, keep cost in USD) and the model version this run registered ('' = none).
        model_id: Registry model id of the run, to name its model version in the notification
            ('' = none).

    Returns:
        action: What it did: none, deleted, kept or absent.
        summary: The cluster's fate in one line; for a kept cluster, until when and what it
            costs per hour meanwhile (USD/hour, from the price table; "unknown" without a
            price for its machine type).
    """
    params = dict(locals())  # the parameters, before the import below binds a name
    from vsp.components.runtime.steps import finalize_cluster

    return finalize_cluster.main(**params)


@component
def reap_expired_clusters(
    project: str, location: str, dry_run: bool = False, prewarm_dir: str = ""
) -> list:
    """Deletes the training clusters whose ``vsp-expires-at`` label has passed.

    Clusters without the label are never touched. Each expired cluster is read again just
    before its deletion and skipped if a new run has claimed it meanwhile. With
    ``prewarm_dir``, it then creates the clusters that a teardown decision deleted to have
    them ready again before their next run, once their creation time has come.

    Args:
        project: Google Cloud project id.
        location: Vertex AI region of the clusters.
        dry_run: Only list what would be deleted (and pre-warmed).
        prewarm_dir: Folder of pre-warm requests written by ``decide_teardown``,
            ``gs://BUCKET/PATH`` or a local path ('' = no pre-warm).

    Returns:
        Names of the clusters deleted (or, with dry_run, that would be deleted). The step fails
        (transient, exit 75) when a deletion failed, after handling every other cluster.
    """
    params = dict(locals())  # the parameters, before the import below binds a name
    from vsp.components.runtime.steps import reap_expired_clusters

    return reap_expired_clusters.main(**params)
