"""Every component of the project, built as KFP components for an image choice.

``component_set(options)`` returns ``{name: component}``; pipelines are built from such a set so
that a template can target a stock Python image (the default) or a prebuilt one.
"""

from __future__ import annotations

import functools

from components import cluster, custom_job, packaging, training

COMPONENT_FUNCTIONS = {
    "create_cluster": cluster.create_cluster,
    "delete_cluster": cluster.delete_cluster,
    "ensure_slurm_account": training.ensure_slurm_account,
    "train_custom_job": custom_job.train_custom_job,
    "train_on_cluster": training.train_on_cluster,
}


@functools.cache
def component_set(options: packaging.ImageOptions = packaging.STOCK_IMAGE) -> dict:
    """The KFP components, built once per image choice."""
    return {
        name: packaging.build_component(func, options) for name, func in COMPONENT_FUNCTIONS.items()
    }
