"""The ``reap_expired_clusters`` step: delete the kept clusters whose expiry has passed.

The rule is ``teardown.reaper.reap_expired``; this is the component's entry.
"""

from __future__ import annotations

import logging

from vsp.components.runtime.cluster import resource
from vsp.components.runtime.core import errors, polling, rest, step
from vsp.components.runtime.teardown import reaper

log = logging.getLogger(__name__)


def main(*, project: str, location: str, dry_run: bool, prewarm_dir: str = "") -> list[str]:
    """The component's entry: its parameters in, its output out (see the component)."""

    def run() -> list[str]:
        parent = resource.ClusterRef(project, location, "-").parent
        report = reaper.reap_expired(
            rest.VertexRestClient(location), parent, dry_run=dry_run, prewarm_dir=prewarm_dir
        )
        for entry in report.entries:
            log.info("%s: %s: %s", entry.name, entry.action, entry.reason)
        for warm in report.prewarm:  # shown as progress: a waiting request is the news here
            polling.progress_log.info(
                "pre-warm of %s: %s: %s", warm.cluster, warm.action, warm.reason
            )
        if report.failed:
            raise errors.TransientError(f"could not delete {sorted(report.failed)}; run again")
        return list(report.would_delete if dry_run else report.deleted)

    return step.run_step("reap_expired_clusters", run)
