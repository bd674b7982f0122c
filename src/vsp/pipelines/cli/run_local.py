"""``vsp run-local``: a pipeline on this machine, on the Vertex emulator, through kfp.local.

By default the terminal gets a line per task state change and the progress of each wait
(``run_console``), and every line kfp.local streams goes to a log file; ``-v`` shows the full
stream instead. A failed run ends with its root cause (the step, its error and fix) and exits
with the failed step's code (2 user error, 75 transient, 70 internal; 1 when no step gave one).
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import pathlib
import sys

import click

from vsp.components.runtime.core import errors, rest
from vsp.pipelines.cli import common
from vsp.vertex_emulator.slurm import real as real_slurm_api


@click.command("run-local", cls=common.VspCommand)
@click.argument("pipeline", default="slurm-spot-training")
@click.option(
    "--param",
    "params",
    multiple=True,
    help="Pipeline parameter NAME=VALUE (repeat). An option group (NAME=JSON object, e.g. "
    'training_options=\'{"launcher": "srun"}\') changes only the keys it gives.',
)
@click.option("--state-dir", default=".vsp/emulator", show_default=True, help="Emulator state.")
@click.option("--outputs", default=".vsp/local_outputs", show_default=True, help="Task outputs.")
@click.option(
    "--provisioning-seconds",
    default=3.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Emulated provisioning time.",
)
@click.option(
    "--preemptions",
    default=None,
    type=click.IntRange(min=0),
    help="Spot preemptions the emulator injects, each a few seconds into a job's run "
    "(default: 3 for slurm-spot-training, 8 for spot-custom-job-training, else 0).",
)
@click.option(
    "--preempt-after",
    default=None,
    type=click.FloatRange(min=0),
    help="Seconds into a run of a preemption (default: 2.5; 10 with --nodes above 1, whose "
    "trainer needs a few seconds to import torch and meet at the rendezvous).",
)
@click.option(
    "--notice-seconds",
    default=1.0,
    show_default=True,
    type=float,
    help="Seconds from a preemption's notice (SIGTERM) to its SIGKILL; GCP gives a Spot VM 30. "
    "A trainer whose save takes longer loses its notice saves.",
)
@click.option(
    "--unannounced-share",
    default=0.0,
    show_default=True,
    type=float,
    help="Share (0 to 1) of the Slurm preemptions that come without notice (SIGKILL at once, "
    "as a host failure), drawn from a seeded stream.",
)
@click.option(
    "--cron",
    default=None,
    help="The schedule's cron, e.g. '0 * * * *', for the teardown decision (as `vsp schedule` "
    "passes it; the same as --param schedule_cron=...): with a frequent cron the cluster is "
    "kept warm for the next run.",
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
    help="Folder holding the shipped pipelines' compiled templates, run by name (default: the "
    "package's, src/vsp/compiled).",
)
@click.option(
    "--enable-caching/--no-enable-caching",
    default=None,
    help="Faithful mode: set execution caching of every task (default: the template's own).",
)
@click.option(
    "--nodes",
    default=1,
    show_default=True,
    type=int,
    help="slurm-spot-training: nodes per job. Above 1 the PyTorch DDP example (the torch "
    "extra) trains on every node, launched by srun (docs/multi-node.md).",
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
    help="With a real Slurm: preempt with a higher-tier partition's job, scontrol requeue, or "
    "the node set DOWN.",
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Show everything kfp.local streams (pip, executor JSON, every log line) instead of a "
    "line per task state change and the progress of waits.",
)
@click.pass_context
@common.handle_errors
def run_local_command(
    ctx: click.Context,
    pipeline: str,
    params: tuple[str, ...],
    state_dir: str,
    outputs: str,
    provisioning_seconds: float,
    preemptions: int,
    preempt_after: float | None,
    notice_seconds: float,
    unannounced_share: float,
    cron: str | None,
    in_process: bool,
    templates: str | None,
    enable_caching: bool | None,
    real_slurm: bool,
    slurmrestd: str | None,
    preemption_mechanism: str,
    verbose: bool,
    nodes: int = 1,
) -> None:
    """Run PIPELINE locally with kfp.local on the Vertex emulator.

    By default the compiled template (what users deploy) runs as Vertex AI Pipelines runs it:
    each step in a fresh virtual environment holding only what its YAML installs, with the
    execution cache on. The emulator's state (clusters, models) lives in --state-dir and
    survives between runs, so a second run can reuse a cluster the first one kept warm.
    """
    from vsp.pipelines.definitions import catalog
    from vsp.pipelines.local import (
        emulator_session,
        run,
        step_console,
        summary,  # noqa: PLC0415
    )

    run.check_pipeline_name(pipeline)
    if nodes != 1 and pipeline != "slurm-spot-training":
        raise errors.UserError(
            f"--nodes {nodes}: only slurm-spot-training trains on several nodes. Fix: drop "
            "--nodes, or run slurm-spot-training."
        )
    shared = os.path.join(os.path.abspath(state_dir), "shared")  # the launcher: inside --state-dir
    # An emulator started apart (VERTEX_EMULATOR_HOST) keeps Cloud Storage in its own folder.
    emulator_state = emulator_session.external_state_dir() if rest.emulator_host() else state_dir
    if rest.emulator_host():
        _warn_unused_emulator_options(ctx)
    gcs_root = os.path.join(os.path.abspath(emulator_state), "gcs")
    address = _real_slurmrestd(real_slurm, slurmrestd)
    typed, definitions, groups = _typed_params(pipeline, templates, params)
    _refuse_nulls(pipeline, typed)  # on the values as given, before the local ones join them
    arguments = _over_local_values(
        catalog.local_arguments(pipeline, shared, gcs_root, real_slurm=bool(address), nodes=nodes),
        typed,
        groups,
    )
    if "command" in typed:  # the user's own trainer: the example's provenance is not its own
        arguments = catalog.without_example_provenance(arguments, typed)
        arguments["command"] = catalog.with_local_interpreter(arguments["command"], shared)
    if definitions is not None:
        from vsp.components.runtime.cluster import rules_base  # noqa: PLC0415
        from vsp.pipelines.vertex import template_parameters  # noqa: PLC0415

        problems = rules_base.Problems()
        template_parameters.check_parameters(
            problems, arguments, definitions, field="--param", groups=groups
        )
        problems.raise_if_any(f"the parameter set of {pipeline}")
    if cron is not None and definitions is not None and "schedule_cron" not in definitions:
        raise errors.UserError(
            f"--cron: {pipeline} has no schedule_cron parameter (it makes no teardown decision "
            "that weighs a schedule). Fix: drop --cron, or run a pipeline that has one, e.g. "
            "slurm-spot-training."
        )
    if cron is not None:
        arguments["schedule_cron"] = cron
        from vsp.pipelines.vertex import schedules  # noqa: PLC0415

        # As `vsp schedule` says of the values given: a schedule's runs all get them.
        for warning in schedules.shared_folder_warnings(typed):
            click.echo(f"warning: {warning}", err=True)
    if preemptions is None:
        preemptions = {"slurm-spot-training": 3, "spot-custom-job-training": 8}.get(pipeline, 0)
    if preempt_after is None:
        preempt_after = 10.0 if nodes > 1 else 2.5
    settings = run.local_settings(
        provisioning_seconds, preemptions, preempt_after, notice_seconds, unannounced_share
    )
    if address:
        settings = dataclasses.replace(
            settings, slurmrestd=address, slurmrestd_preemption=preemption_mechanism
        )
        _warn_emulated_slurm_options(ctx)
        click.echo(f"Slurm: the real slurmrestd at {address} ({preemption_mechanism} preemptions)")
    verbose = verbose or bool(ctx.find_root().params.get("verbose"))
    log_path = _log_path(outputs, pipeline)
    with open(log_path, "w") as log_file:
        console = None if verbose else step_console.StepConsole(sys.stdout, log_file)
        result = run.run_local(
            pipeline,
            arguments,
            state_dir=state_dir,
            pipeline_root=outputs,
            settings=settings,
            in_process=in_process,
            template_dir=templates,
            enable_caching=enable_caching,
            console=console,
        )
    lines = summary.terminal_lines(
        result,
        preemptions=preemptions,
        arguments=arguments,
        show_arguments=verbose,
        durations=console.durations if console is not None else None,
        log_path=log_path if console is not None else "",
    )
    click.echo("\n" + "\n".join(lines))
    if result.interrupted:
        click.echo(f"error: {result.error}", err=True)
        sys.exit(result.interrupted)
    if not result.succeeded:
        failure = console.failure if console is not None else None
        if failure is None:
            click.echo(f"error: {result.error}", err=True)
            sys.exit(1)
        code = f" (exit {failure.exit_code})" if failure.exit_code else ""
        click.echo(
            f"error: step {failure.task} failed{code}: {failure.error or result.error}", err=True
        )
        sys.exit(failure.exit_code or 1)


# The options that set up the emulator run-local starts itself.
_OWN_EMULATOR_OPTIONS = (
    "provisioning_seconds", "preemptions", "preempt_after", "notice_seconds", "unannounced_share",
)  # fmt: skip


def _given_on_command_line(ctx: click.Context, names: tuple[str, ...]) -> list[str]:
    """The options among ``names`` the command line set, spelled as typed (``--notice-seconds``)."""
    return [
        "--" + name.replace("_", "-")
        for name in names
        if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE
    ]


def _warn_emulated_slurm_options(ctx: click.Context) -> None:
    given = _given_on_command_line(ctx, ("notice_seconds", "unannounced_share"))
    if given:
        click.echo(
            f"warning: {_options(given)} set the emulated Slurm's preemptions; a real Slurm "
            "preempts as --preemption-mechanism says, with the notice its slurm.conf gives "
            "(KillWait), so they are not used.",
            err=True,
        )


def _warn_unused_emulator_options(ctx: click.Context) -> None:
    given = _given_on_command_line(ctx, _OWN_EMULATOR_OPTIONS)
    if given:
        click.echo(
            f"warning: {_options(given)} set the emulator that run-local starts itself, and "
            f"none is started: the emulator {rest.EMULATOR_ENV} names keeps its own settings "
            "and plans (set them through its control API: docs/emulator.md), so they are not "
            "used.",
            err=True,
        )


def _options(names: list[str]) -> str:
    """``--a`` / ``--a and --b`` / ``--a, --b and --c``, as the subject of a sentence."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _refuse_nulls(pipeline: str, given: dict) -> None:
    from vsp.components.runtime.cluster import rules_base  # noqa: PLC0415
    from vsp.pipelines.vertex import template_parameters  # noqa: PLC0415

    problems = rules_base.Problems()
    template_parameters.check_nulls(problems, given, "--param")
    problems.raise_if_any(f"the parameter set of {pipeline}")


def _over_local_values(local: dict, given: dict, groups: dict) -> dict:
    """The local run's arguments with ``--param`` values over them. An option group given as a
    dict (``training_options={...}``) is merged over the group's local values, which wire the run
    to this machine (the log folder, the short polls, the prices, the trainer's environment):
    only the keys given change, inside a map too (``{"environment": {"A": "1"}}`` adds ``A``)."""
    merged = {**local, **given}
    for name, value in given.items():
        if name in groups and isinstance(value, dict) and isinstance(local.get(name), dict):
            merged[name] = _merge_maps(local[name], value)
    return merged


def _merge_maps(under: dict, over: dict) -> dict:
    merged = {**under, **over}
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(under.get(key), dict):
            merged[key] = _merge_maps(under[key], value)
    return merged


def _log_path(outputs: str, pipeline: str) -> str:
    """Where a run's full output goes: ``<outputs>/logs/<pipeline>-<UTC time>.log``."""
    folder = pathlib.Path(outputs) / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return str(folder / f"{pipeline}-{stamp}.log")


def _real_slurmrestd(real_slurm: bool, slurmrestd: str | None) -> str:
    """The real slurmrestd address asked for ('' = the emulated Slurm)."""
    if slurmrestd:
        return _checked_slurmrestd(slurmrestd)
    if not real_slurm:
        return ""
    address = os.environ.get(real_slurm_api.ADDRESS_ENV, "")
    if not address:
        raise click.UsageError(
            f"--real-slurm needs ${real_slurm_api.ADDRESS_ENV}. Fix: build and start a real Slurm "
            "(docs/real-slurm.md: build.sh, then start.sh DIR and `. DIR/env.sh`), or pass "
            "--slurmrestd SOCKET_OR_URL."
        )
    return _checked_slurmrestd(address)


def _checked_slurmrestd(address: str) -> str:
    """The address, once a ping shows a v0.0.42 slurmrestd answers there (before any run)."""
    try:
        rest = real_slurm_api.RealSlurmrestd(address, timeout=10)
        status, text = rest.call("GET", "/slurm/v0.0.42/ping")
    except (ValueError, real_slurm_api.SlurmrestdUnavailable) as exc:
        raise click.UsageError(f"{exc}. Fix: start the real Slurm (docs/real-slurm.md).") from exc
    if status != 200:
        raise click.UsageError(
            f"slurmrestd at {address} answered the v0.0.42 ping with HTTP {status}: "
            f"{text[:300]}. Fix: serve data_parser v0.0.42 (`slurmrestd -d v0.0.42`), and for "
            "http:// addresses set $VSP_REAL_SLURMRESTD_TOKEN (`scontrol token`)."
        )
    return rest.address


def _typed_params(
    pipeline: str, templates: str | None, params: tuple[str, ...]
) -> tuple[dict, dict | None, dict]:
    """``--param`` values by the compiled template's declared types, those declarations, and
    the template's option groups.

    A STRING parameter keeps its text (``--param cluster_id=001`` stays ``"001"``); without a
    compiled template every value is read as YAML and the declarations are None.
    """
    from vsp.pipelines.local import run
    from vsp.pipelines.vertex import template_parameters  # noqa: PLC0415
    from vsp.pipelines.vertex import templates as pipeline_templates  # noqa: PLC0415

    try:
        path = run.compiled_template(pipeline, templates)
        spec = pipeline_templates.load_pipeline_spec(str(path))
    except errors.UserError:
        return common.parse_params(params), None, {}  # no template: the run reports it
    definitions = template_parameters.root_parameters(spec)
    raw = common.parse_params(params, raw=True)
    typed = template_parameters.typed_parameters(raw, definitions)
    return typed, definitions, template_parameters.option_groups(spec)
