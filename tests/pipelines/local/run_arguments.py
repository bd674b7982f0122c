"""Test helpers: a local run's arguments with overrides, each in its option group if it has
one, and the main pipeline run locally with them.

The main pipeline's short form takes rarely set parameters in option groups
(``training_options`` ...); tests name them flat, as the components do, and ``with_overrides``
puts each where the pipeline takes it, merged into the group's values the local run already has.
"""

from __future__ import annotations

from typing import Any

from vsp.components import catalog
from vsp.pipelines.definitions import parameters, slurm_spot_training
from vsp.pipelines.local import results, run


def with_overrides(arguments: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """``arguments`` with ``overrides`` applied: top-level names as given, the others into their
    option group (slurm-spot-training's), an explicit group dict merged over the one present."""
    components = catalog.component_set()
    top = set(slurm_spot_training.build(components).component_spec.inputs)
    groups = {
        group: parameters.option_names(components[name])
        for group, name in slurm_spot_training.OPTION_GROUPS.items()
    }
    merged = {k: (dict(v) if isinstance(v, dict) else v) for k, v in arguments.items()}
    for name, value in overrides.items():
        if name in groups and isinstance(value, dict):
            merged[name] = {**merged.get(name, {}), **value}
        elif name in top:
            merged[name] = value
        else:
            group = next((g for g, names in groups.items() if name in names), None)
            if group is None:
                merged[name] = value  # not a pipeline parameter: the run refuses it
            else:
                merged[group] = {**merged.get(group, {}), name: value}
    return merged


def run_main(tmp_path: Any, arguments: dict[str, Any], **options: Any) -> results.LocalRunResult:
    """slurm-spot-training run locally with ``arguments``: the emulator's state and the task
    outputs under ``tmp_path``, 0.3 s provisioning unless ``options`` give ``settings``, the
    faithful mode unless they give ``in_process=True``."""
    return run.run_local(
        "slurm-spot-training",
        arguments,
        state_dir=str(tmp_path / "emulator"),
        pipeline_root=str(tmp_path / "outputs"),
        **{"settings": run.local_settings(0.3), **options},
    )
