"""The ``reap-expired-clusters`` pipeline: delete kept clusters whose expiry has passed.

A cluster kept warm by ``slurm-spot-training`` carries ``vsp-expires-at`` (the next expected
run plus slack, or the end of a retry window after a failure). When no run claims it by then,
this pipeline, run on a schedule (e.g. hourly), deletes it. Clusters without the label are never
touched. ``vsp clusters reap`` does the same from a terminal.
"""

from kfp import dsl

from vsp.pipelines.definitions import task_policy

# No postponed annotations here: kfp reads the pipeline signature types at definition time.
NAME = "reap-expired-clusters"


def build(components: dict):
    """Builds the pipeline function from a component set (see ``components.catalog``)."""
    reap = components["reap_expired_clusters"]

    @dsl.pipeline(
        name=NAME,
        description="Delete the Vertex AI training clusters whose vsp-expires-at label has "
        "passed (clusters kept warm that no run reused in time).",
    )
    def reap_expired_clusters(project: str, location: str = "us-central1", dry_run: bool = False):
        """Delete expired training clusters.

        Args:
            project: Google Cloud project id.
            location: Vertex AI region of the clusters.
            dry_run: Only list what would be deleted.
        """
        task = reap(project=project, location=location, dry_run=dry_run)
        task_policy.apply(task, "reap-expired-clusters")

    return reap_expired_clusters
