"""The ``reap-expired-clusters`` pipeline: delete kept clusters whose expiry has passed.

A cluster kept warm by ``slurm-spot-training`` carries ``vsp-expires-at`` (the next expected
run plus slack, or the end of a retry window after a failure). When no run claims it by then,
this pipeline, run on a schedule (every 10 minutes), deletes it. Clusters without the label are
never touched. With ``prewarm_dir`` it also creates the clusters a teardown decision deleted to
have them ready before their next cron tick. ``vsp clusters reap`` does the same from a terminal.
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
    def reap_expired_clusters(
        project: str, location: str = "us-central1", dry_run: bool = False, prewarm_dir: str = ""
    ):
        """Delete expired training clusters, and create the ones whose pre-warm is due.

        Args:
            project: Google Cloud project id.
            location: Vertex AI region of the clusters.
            dry_run: Only list what would be deleted (and pre-warmed).
            prewarm_dir: Folder of pre-warm requests written by the teardown decision
                (``gs://BUCKET/PATH``; '' = no pre-warm).
        """
        task = reap(project=project, location=location, dry_run=dry_run, prewarm_dir=prewarm_dir)
        task_policy.apply(task, "reap-expired-clusters")

    return reap_expired_clusters
