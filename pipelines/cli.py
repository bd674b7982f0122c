"""The ``vsp`` command line: compile, run-local, emulator and clusters.

Errors follow the runtime's taxonomy: a user error prints its message and exits 2, a transient
error exits 75, anything unexpected exits 70 with a traceback in the log.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys

import click

from vsp.components.runtime.core import errors
from vsp.pipelines import cli_common
from vsp.vertex_emulator.slurm import real as real_slurm_api

log = logging.getLogger("vsp")


@click.group()
@click.option("-v", "--verbose", is_flag=True, help="Log debug details.")
@click.version_option(package_name="vertex-slurm-pipelines", prog_name="vsp")
def main(verbose: bool) -> None:
    """vertex-slurm-pipelines: Slurm training clusters and Spot training on Vertex AI."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )


@main.command("compile")
@click.option("--out", "out_dir", default="compiled", show_default=True, help="Output folder.")
@click.option(
    "--base-image",
    default=None,
    help="A prebuilt image with kfp and the runtime requirements; default: a stock Python image "
    "with pip installs at step start.",
)
@cli_common.handle_errors
def compile_command(out_dir: str, base_image: str | None) -> None:
    """Compile every pipeline and component into YAML templates."""
    from vsp.components import packaging  # noqa: PLC0415 - kfp import is slow
    from vsp.pipelines import compile as compile_module  # noqa: PLC0415

    options = packaging.STOCK_IMAGE
    if base_image:
        options = packaging.ImageOptions(base_image=base_image, install_packages=False)
    for path in compile_module.compile_all(out_dir, options):
        click.echo(f"wrote {path}")


@main.command("run-local")
@click.argument("pipeline", default="slurm-spot-training")
@click.option("--param", "params", multiple=True, help="Pipeline parameter NAME=VALUE (repeat).")
@click.option("--state-dir", default=".vsp/emulator", show_default=True, help="Emulator state.")
@click.option("--outputs", default=".vsp/local_outputs", show_default=True, help="Task outputs.")
@click.option(
    "--provisioning-seconds", default=3.0, show_default=True, help="Emulated provisioning time."
)
@click.option(
    "--preemptions",
    default=None,
    type=int,
    help="Spot preemptions the emulator injects, each a few seconds into a job's run "
    "(default: 3 for slurm-spot-training, 8 for spot-custom-job-training, else 0).",
)
@click.option(
    "--preempt-after", default=2.5, show_default=True, help="Seconds into a run of a preemption."
)
@click.option(
    "--cron",
    default=None,
    help="The schedule's cron, e.g. '0 * * * *', for the teardown decision (as `vsp schedule` "
    "passes it): with a frequent cron the cluster is kept warm for the next run.",
)
@click.option(
    "--in-process",
    is_flag=True,
    help="Quick iteration: run the pipeline rebuilt from the sources in this environment, "
    "instead of the compiled template with a fresh virtual environment per step.",
)
@click.option(
    "--templates",
    default=None,
    help="Folder of compiled templates to run (default: the repository's compiled/).",
)
@click.option(
    "--enable-caching/--no-enable-caching",
    default=None,
    help="Faithful mode: set execution caching of every task (default: the template's own).",
)
@click.option(
    "--real-slurm",
    is_flag=True,
    help="Train on a real Slurm: the emulator forwards the Slurm Job API to the slurmrestd "
    "named by $VSP_REAL_SLURMRESTD (as the real Slurm's env.sh sets it).",
)
@click.option(
    "--slurmrestd",
    default=None,
    help="Train on the real Slurm behind this slurmrestd (unix socket path or "
    "http://HOST:PORT; implies --real-slurm).",
)
@click.option(
    "--preemption-mechanism",
    type=click.Choice(real_slurm_api.PREEMPTION_MECHANISMS),
    default="partition",
    show_default=True,
    help="With a real Slurm: preempt with a higher-tier partition's job, or scontrol requeue.",
)
@cli_common.handle_errors
def run_local_command(
    pipeline: str,
    params: tuple[str, ...],
    state_dir: str,
    outputs: str,
    provisioning_seconds: float,
    preemptions: int,
    preempt_after: float,
    cron: str | None,
    in_process: bool,
    templates: str | None,
    enable_caching: bool | None,
    real_slurm: bool,
    slurmrestd: str | None,
    preemption_mechanism: str,
) -> None:
    """Run PIPELINE locally with kfp.local on the Vertex emulator.

    By default the compiled template (what users deploy) runs as Vertex AI Pipelines runs it:
    each step in a fresh virtual environment holding only what its YAML installs, with the
    execution cache on. The emulator's state (clusters, models) lives in --state-dir and
    survives between runs, so a second run can reuse a cluster the first one kept warm.
    """
    from vsp.pipelines import local_run, registry, run_summary  # noqa: PLC0415

    shared = os.path.abspath(os.path.join(state_dir, os.pardir, "shared"))
    gcs_root = os.path.join(os.path.abspath(state_dir), "gcs")
    address = _real_slurmrestd(real_slurm, slurmrestd)
    steps = registry.REAL_SLURM_TRAINER_STEPS if address else 0
    typed, definitions = _typed_params(pipeline, templates, params)
    arguments = {
        **registry.local_arguments(pipeline, shared, gcs_root, trainer_steps=steps),
        **typed,
    }
    if definitions is not None:
        from vsp.components.runtime.cluster import rules_base  # noqa: PLC0415
        from vsp.pipelines import pipeline_templates  # noqa: PLC0415

        problems = rules_base.Problems()
        pipeline_templates.check_parameters(problems, arguments, definitions, field="--param")
        problems.raise_if_any(f"the parameters of {pipeline}")
    if cron is not None:
        arguments["schedule_cron"] = cron
    if preemptions is None:
        preemptions = {"slurm-spot-training": 3, "spot-custom-job-training": 8}.get(pipeline, 0)
    settings = local_run.local_settings(provisioning_seconds, preemptions, preempt_after)
    if address:
        settings = dataclasses.replace(
            settings, slurmrestd=address, slurmrestd_preemption=preemption_mechanism
        )
        click.echo(f"Slurm: the real slurmrestd at {address} ({preemption_mechanism} preemptions)")
    result = local_run.run_local(
        pipeline,
        arguments,
        state_dir=state_dir,
        pipeline_root=outputs,
        settings=settings,
        in_process=in_process,
        template_dir=templates,
        enable_caching=enable_caching,
    )
    click.echo("")
    click.echo(f"pipeline {result.pipeline}: {'SUCCEEDED' if result.succeeded else 'FAILED'}")
    mode = "in-process (sources)" if in_process else "faithful (compiled template, venv per step)"
    click.echo(f"  mode: {mode}")
    click.echo(f"  wall time: {result.seconds:.1f} s")
    click.echo(f"  parameters: {json.dumps(arguments, sort_keys=True)}")
    click.echo(f"  injected preemptions: {preemptions}")
    for line in run_summary.summary_lines(result):
        click.echo(line)
    click.echo("  requests: " + ", ".join(f"{c} {n}" for c, n in sorted(result.calls.items())))
    for name, path in sorted(result.outputs.items()):
        if name.endswith("/metrics"):
            click.echo(f"  {name}: {_metrics_line(path)}")
    report = run_summary.write_report(result)
    if report:
        click.echo(f"  report: {report}")
    if result.state_dir:
        click.echo(f"  emulator journal: {result.state_dir}/journal.jsonl")
    if not result.succeeded:
        click.echo(f"  error: {result.error}", err=True)
        sys.exit(1)


def _real_slurmrestd(real_slurm: bool, slurmrestd: str | None) -> str:
    """The real slurmrestd address asked for ('' = the emulated Slurm)."""
    if slurmrestd:
        return _checked_slurmrestd(slurmrestd)
    if not real_slurm:
        return ""
    address = os.environ.get(real_slurm_api.ADDRESS_ENV, "")
    if not address:
        raise click.UsageError(
            f"--real-slurm needs ${real_slurm_api.ADDRESS_ENV}. Build and start a real Slurm "
            "(see the README: build.sh, then start.sh DIR and `. DIR/env.sh`), or pass "
            "--slurmrestd SOCKET_OR_URL."
        )
    return _checked_slurmrestd(address)


def _checked_slurmrestd(address: str) -> str:
    """The address, once a ping shows a v0.0.42 slurmrestd answers there (before any run)."""
    try:
        rest = real_slurm_api.RealSlurmrestd(address, timeout=10)
        status, text = rest.call("GET", "/slurm/v0.0.42/ping")
    except (ValueError, real_slurm_api.SlurmrestdUnavailable) as exc:
        raise click.UsageError(f"{exc}. Fix: start the real Slurm (see the README).") from exc
    if status != 200:
        raise click.UsageError(
            f"slurmrestd at {address} answered the v0.0.42 ping with HTTP {status}: "
            f"{text[:300]}. Fix: serve data_parser v0.0.42 (`slurmrestd -d v0.0.42`), and for "
            "http:// addresses set $VSP_REAL_SLURMRESTD_TOKEN (`scontrol token`)."
        )
    return rest.address


def _metrics_line(path: str) -> str:
    try:
        with open(path) as handle:
            values = json.load(handle)
    except (OSError, ValueError):
        return f"see {path}"
    shown = (
        "preemptions",
        "resubmissions",
        "goodput",
        "work_lost_seconds",
        "node_hours_billed",
        "teardown_keep",
        "teardown_shrink",
        "teardown_cost_if_kept",
        "teardown_cost_if_shrunk",
        "teardown_cost_if_deleted",
    )
    return ", ".join(f"{k}={values[k]:g}" for k in shown if isinstance(values.get(k), (int, float)))


def _typed_params(
    pipeline: str, templates: str | None, params: tuple[str, ...]
) -> tuple[dict, dict | None]:
    """``--param`` values by the compiled template's declared types, and those declarations.

    A STRING parameter keeps its text (``--param cluster_id=001`` stays ``"001"``); without a
    compiled template every value is read as YAML and the declarations are None.
    """
    from vsp.pipelines import local_run, pipeline_templates  # noqa: PLC0415

    try:
        path = local_run.compiled_template(pipeline, templates)
        definitions = pipeline_templates.root_parameters(
            pipeline_templates.load_pipeline_spec(str(path))
        )
    except errors.UserError:
        return cli_common.parse_params(params), None  # no template: the run reports it
    raw = cli_common.parse_params(params, raw=True)
    return pipeline_templates.typed_parameters(raw, definitions), definitions


@main.group()
def emulator() -> None:
    """The local Vertex emulator."""


@emulator.command("start")
@click.option("--state-dir", required=True, help="Folder holding the emulator's state.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8618, show_default=True, type=int)
@click.option("--provisioning-seconds", default=3.0, show_default=True)
@click.option(
    "--slurmrestd",
    default="",
    help="Forward every cluster's Slurm Job API to this real slurmrestd (unix socket path or "
    "http://HOST:PORT; JWT from $VSP_REAL_SLURMRESTD_TOKEN).",
)
@click.option(
    "--preemption-mechanism",
    type=click.Choice(real_slurm_api.PREEMPTION_MECHANISMS),
    default="partition",
    show_default=True,
    help="With --slurmrestd: how injected Spot preemptions are made on the real Slurm.",
)
def emulator_start(
    state_dir: str,
    host: str,
    port: int,
    provisioning_seconds: float,
    slurmrestd: str,
    preemption_mechanism: str,
) -> None:
    """Serve the emulator in the foreground until interrupted."""
    from vsp import vertex_emulator as server  # noqa: PLC0415

    try:
        settings = server.EmulatorSettings(
            provisioning_delay_seconds=provisioning_seconds,
            slurmrestd=real_slurm_api.check_address(slurmrestd) if slurmrestd else "",
            slurmrestd_preemption=preemption_mechanism,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    server.serve(state_dir, host, port, settings)


from vsp.pipelines import cli_clusters  # noqa: E402  (registers the `clusters` group)

main.add_command(cli_clusters.clusters)

from vsp.pipelines import cli_vertex  # noqa: E402  (registers `submit`, `schedule`, `publish`)

for _command in (cli_vertex.submit, cli_vertex.schedule, cli_vertex.publish):
    main.add_command(_command)
