"""``vsp clusters``: list, inspect, delete and reap training clusters (Vertex or the emulator)."""

from __future__ import annotations

import json

import click

from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.core import errors, gcp_labels, readable_time
from vsp.components.runtime.teardown import cost as teardown_cost
from vsp.components.runtime.teardown import in_use, prewarm_intents, price_book, reaper
from vsp.pipelines.cli import common

# The labels `clusters list` shows, in column order.
SHOWN_LABELS = (
    gcp_labels.TEARDOWN,
    gcp_labels.EXPIRES_AT,
    gcp_labels.LAST_RUN,
    gcp_labels.LAST_USED_AT,
)


@click.group()
def clusters() -> None:
    """Training clusters (modelDevelopmentClusters)."""


def _location_options(func):
    func = click.option("--location", required=True, help="Vertex region, e.g. us-central1.")(func)
    return click.option("--project", required=True, help="Google Cloud project id.")(func)


def _idle_cost(cluster: dict, location: str, book) -> tuple[str, str]:
    """The cluster's idle cost per hour as a column, and its source ('' when unpriced)."""
    try:
        cost = teardown_cost.cluster_cost(cluster, location=location, book=book)
    except errors.UserError as exc:
        return "no price", str(exc)
    return f"{cost.total_per_hour:.2f}", cost.source


@clusters.command("list")
@_location_options
@click.option(
    "--price-file",
    default="",
    help="JSON or YAML prices (USD per node-hour) merged over the price table.",
)
@click.option(
    "--prewarm-dir",
    default="",
    help="Folder of pre-warm requests (gs://BUCKET/PATH or a local path): also list the "
    "clusters the reaper will create, and when.",
)
@common.handle_errors
def list_clusters(project: str, location: str, price_file: str, prewarm_dir: str) -> None:
    """List clusters: name, state, idle cost, created, teardown, expiry, last run, last use.

    With --prewarm-dir, the clusters deleted to be re-created before their next run follow,
    one line each: name, "pre-warm", when the reaper creates it, when it should be ready,
    the run's tick.

    The idle cost is what the cluster costs per hour as it stands (USD/hour): the nodes each
    pool keeps (a shrunk cluster keeps only its login nodes) at the price table's figure for
    the machine and provisioning model, or the price file's.
    """
    client = common.client(location)
    ref = cluster_resource.ClusterRef(project, location, "-")
    book = price_book.PriceBook.load(price_file, location)
    click.echo("name\tstate\tidle USD/h\tcreated\tteardown\texpires\tlast run\tlast used")
    notes: dict[str, None] = {}  # ordered, without repeats
    for cluster in cluster_resource.list_clusters(client, ref.parent):
        labels = cluster.get("labels") or {}
        idle, source = _idle_cost(cluster, location, book)
        name = cluster.get("name", "").rsplit("/", 1)[-1]
        if source:
            notes[f"{name}: {source}" if idle == "no price" else source] = None
        columns = [
            name,
            cluster_resource.cluster_state(cluster),
            idle,
            cluster.get("createTime", ""),
            *(
                labels.get(k, "")
                for k in (gcp_labels.TEARDOWN, gcp_labels.EXPIRES_AT, gcp_labels.LAST_RUN)
            ),
            labels.get(gcp_labels.LAST_USED_AT, ""),
        ]
        click.echo("\t".join(columns).rstrip())
    if prewarm_dir:
        for _, intent in prewarm_intents.read_all(prewarm_dir):
            if intent.parent != ref.parent:
                continue
            times = (intent.create_at, intent.ready_at, intent.tick)
            when = "\t".join(
                f"{label} {readable_time.utc(t)}"
                for label, t in zip(("created at", "ready by", "run at"), times, strict=True)
            )
            click.echo(f"{intent.cluster.rsplit('/', 1)[-1]}\tpre-warm\t{when}")
    for note in notes:
        click.echo(f"idle cost: {note}")


@clusters.command("get")
@_location_options
@click.argument("cluster_id")
@common.handle_errors
def get_cluster(project: str, location: str, cluster_id: str) -> None:
    """Print one cluster as JSON."""
    client = common.client(location)
    resource = cluster_resource.ClusterResource(
        client, cluster_resource.ClusterRef(project, location, cluster_id)
    )
    cluster = resource.get()
    if cluster is None:
        raise errors.UserError(
            f"cluster {resource.ref.name} does not exist. Fix: see the clusters there with "
            f"`vsp clusters list --project {project} --location {location}`."
        )
    click.echo(json.dumps(cluster, indent=2, sort_keys=True))


@clusters.command("delete")
@_location_options
@click.argument("cluster_id")
@click.option(
    "--force",
    is_flag=True,
    help="Delete it even while a run's jobs or claim use it (those runs fail).",
)
@common.handle_errors
def delete_cluster(project: str, location: str, cluster_id: str, force: bool) -> None:
    """Delete a cluster and wait until it is gone (missing is fine).

    A cluster a pipeline run is using (an unfinished job, or a live claim between its steps) is
    not deleted but labelled to expire, as every other delete path does, unless --force.
    """
    client = common.client(location)
    ref = cluster_resource.ClusterRef(project, location, cluster_id)
    resource = cluster_resource.ClusterResource(client, ref)
    if force:
        deleted = resource.delete()
    else:
        outcome = in_use.delete_unless_in_use(client, ref, pipeline_run="", delete=resource.delete)
        if outcome == in_use.IN_USE:
            raise errors.UserError(
                f"cluster {ref.name} is in use (the warning above names by what): not deleted, "
                f"but labelled to expire in {in_use.DEFAULT_RECHECK_MINUTES:.0f} minutes, when "
                "the reaper deletes it if nothing uses it then. Fix: wait for those runs, or "
                "add --force to delete it under them (their jobs fail)."
            )
        deleted = outcome == in_use.DELETED
    click.echo(f"{'deleted' if deleted else 'already absent'}: {resource.ref.name}")


@clusters.command("reap")
@_location_options
@click.option("--dry-run", is_flag=True, help="Only print what would be deleted.")
@click.option(
    "--prewarm-dir",
    default="",
    help="Folder of pre-warm requests (gs://BUCKET/PATH or a local path): also create the "
    "clusters whose pre-warm is due.",
)
@common.handle_errors
def reap_clusters(project: str, location: str, dry_run: bool, prewarm_dir: str) -> None:
    """Delete the clusters whose vsp-expires-at label has passed (kept ones are left alone)."""
    client = common.client(location)
    parent = cluster_resource.ClusterRef(project, location, "-").parent
    report = reaper.reap_expired(client, parent, dry_run=dry_run, prewarm_dir=prewarm_dir)
    for entry in report.entries:
        click.echo(f"{entry.cluster_id}: {entry.action}: {entry.reason}")
    for warm in report.prewarm:
        click.echo(f"{warm.cluster.rsplit('/', 1)[-1]}: {warm.action}: {warm.reason}")
    click.echo(f"total: {report.summary()}{' (dry run)' if dry_run else ''}")
    if report.failed:
        names = ", ".join(sorted(n.rsplit("/", 1)[-1] for n in report.failed))
        raise errors.TransientError(
            f"could not delete expired clusters {names}. Fix: see the errors above, then run "
            "`vsp clusters reap` again."
        )
