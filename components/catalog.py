"""Every component of the project, built as KFP components for an image choice.

``component_set(options)`` returns ``{name: component}``; pipelines are built from such a set so
that a template can target a stock Python image (the default) or a prebuilt one.
"""

from __future__ import annotations

import functools

from vsp.components import (
    cluster,
    cluster_teardown,
    custom_job,
    packaging,
    preflight,
    registration,
    training,
)

COMPONENT_FUNCTIONS = {
    "check_run_parameters": preflight.check_run_parameters,
    "create_cluster": cluster.create_cluster,
    "decide_teardown": cluster_teardown.decide_teardown,
    "delete_cluster": cluster.delete_cluster,
    "ensure_slurm_account": training.ensure_slurm_account,
    "finalize_cluster": cluster_teardown.finalize_cluster,
    "finalize_custom_jobs": custom_job.finalize_custom_jobs,
    "keep_cluster": cluster_teardown.keep_cluster,
    "reap_expired_clusters": cluster_teardown.reap_expired_clusters,
    "shrink_cluster": cluster_teardown.shrink_cluster,
    "register_model": registration.register_model,
    "train_custom_job": custom_job.train_custom_job,
    "train_on_cluster": training.train_on_cluster,
}
# Requirements a component needs beyond the runtime's (pip specifiers), by component name. None
# today: ``register_model``'s ``google.VertexModel`` output type is embedded
# (``vsp.components.artifact_types``) rather than installed with GCPC.
EXTRA_PACKAGES: dict[str, tuple[str, ...]] = {}


@functools.cache
def component_set(options: packaging.ImageOptions = packaging.STOCK_IMAGE) -> dict:
    """The KFP components, built once per image choice."""
    return {
        name: packaging.build_component(func, options, EXTRA_PACKAGES.get(name, ()))
        for name, func in COMPONENT_FUNCTIONS.items()
    }
