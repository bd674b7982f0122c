"""``vsp submit`` and ``vsp schedule``: run templates on Vertex AI Pipelines.

``submit`` creates one pipeline run, ``schedule`` a cron schedule of runs. Requests are validated
before anything is sent (``pipelines/vertex/jobs.py``, ``schedules.py``); a registry tag is
resolved to its ``sha256:`` version first (``cli/registry.py``). With ``VERTEX_EMULATOR_HOST``
set, the Vertex requests go to the local emulator (which stores runs and schedules but never runs
them).
"""

from __future__ import annotations

import json
import shlex
from typing import Any

import click

from vsp.components.runtime.core import errors
from vsp.components.runtime.teardown import cadence
from vsp.pipelines.cli import code_pack, common, registry
from vsp.pipelines.vertex import (
    caching,
    first_step_check,
    jobs,
    schedule_times,
    schedules,
    template_parameters,
    templates,
)


def _pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise errors.UserError(f"{option} {item!r} is not KEY=VALUE. Fix: {option} key=value.")
        out[key] = value
    return out


def _job_options(func):
    options = [
        click.option(
            "--dry-run",
            is_flag=True,
            help="Print the request body and send nothing (a registry tag is still resolved).",
        ),
        click.option("--display-name", default=None, help="Default: the pipeline's name."),
        click.option(
            "--enable-caching/--no-enable-caching",
            default=None,
            help="Set execution caching of every task. Default: the template's own per-task "
            "settings (ours cache only the pure parameter check; forcing caching on can make "
            "a scheduled run skip its teardown and leave the cluster running).",
        ),
        click.option("--label", "labels", multiple=True, help="Run label KEY=VALUE (repeat)."),
        click.option("--service-account", default=None, help="Email the runs act as."),
        click.option("--pipeline-root", required=True, help="gs:// directory for outputs."),
        click.option(
            "--param",
            "params",
            multiple=True,
            help="Pipeline parameter NAME=VALUE (repeat); STRING parameters of a local "
            "template keep the text as written, other values are read as YAML/JSON.",
        ),
        click.option(
            "--template",
            required=True,
            help="Compiled pipeline YAML, the name of a pipeline shipped with vsp (e.g. "
            "slurm-spot-training), or https://REGION-kfp.pkg.dev/PROJECT/REPO/PACKAGE/"
            "TAG|sha256:DIGEST (a tag is resolved to its version first).",
        ),
        click.option("--location", required=True, help="Vertex region, e.g. us-central1."),
        click.option("--project", required=True, help="Google Cloud project id."),
    ]
    for option in options:
        func = option(func)
    return func


CODE_GROUP = "training_options"  # where a pipeline with option groups takes code_uri


def with_code(
    values: dict[str, Any], definitions: dict[str, Any] | None, uri: str, sha256: str
) -> dict[str, Any]:
    """The parameter values with ``code_uri`` and ``code_sha256`` set for the staged code.

    They go into ``training_options`` when the template has that group (or its parameters are
    unknown, as for a registry template), else into its own ``code_uri``/``code_sha256``.

    Raises:
        errors.UserError: The template takes neither, or code_uri is also set by --param.
    """
    code = {"code_uri": uri, "code_sha256": sha256}
    out = dict(values)
    if definitions is None or CODE_GROUP in definitions:
        group = out.get(CODE_GROUP) or {}
        if not isinstance(group, dict) or set(code) & set(group):
            raise errors.UserError(
                f"--code and --param {CODE_GROUP}=... both set the code. Fix: drop code_uri "
                f"and code_sha256 from {CODE_GROUP}, or drop --code."
            )
        out[CODE_GROUP] = {**group, **code}
    elif "code_uri" in definitions and "code_sha256" in definitions:
        if set(code) & set(values):
            raise errors.UserError(
                "--code and --param code_uri=... both set the code. Fix: drop one of them."
            )
        out.update(code)
    else:
        raise errors.UserError(
            "--code: the template takes neither training_options nor code_uri and "
            "code_sha256, so it cannot run staged code. Fix: use slurm-spot-training or a "
            "pipeline passing code_uri to train_on_cluster."
        )
    return out


def _job_request(
    options: dict[str, Any],
    cron: str | None = None,
    code: tuple[str, str] | None = None,
    also: list[errors.SpecProblem] | None = None,
    **extra: Any,
) -> jobs.PipelineJobRequest:
    """The validated run request from the shared options, its registry tag resolved.

    Args:
        options: The ``_job_options`` values.
        cron: The schedule's cron (``schedule`` only): fills ``schedule_cron`` when declared.
        code: ``(code_uri, code_sha256)`` of code staged by ``--code`` (None = none).
        also: Problems found in the command's own options (a schedule's cron and times),
            reported in the same list as the run's.
        **extra: More ``PipelineJobRequest`` fields (``job_id``).
    """
    template = templates.template_path(options["template"])
    raw = common.parse_params(options["params"], raw=True)
    definitions = spec = None
    if not templates.is_registry_uri(template):
        try:
            spec = templates.load_pipeline_spec(template)
            definitions = template_parameters.root_parameters(spec)
        except errors.UserError:
            definitions = None  # reported with every other problem by the request below
    elif not {"project", "location"} <= set(raw):
        click.echo(
            "note: parameters of a registry template are not checked here; if the pipeline has "
            "project and location parameters, pass them: --param project=... --param "
            "location=... (a value that differs from --project/--location is refused)",
            err=True,
        )
    if (
        templates.is_registry_uri(template)
        and cron is not None
        and (schedules.SCHEDULE_CRON not in raw)
    ):
        click.echo(
            "note: parameters of a registry template are not checked here; if the pipeline has "
            "schedule_cron, pass it: --param schedule_cron=...",
            err=True,
        )
    values = template_parameters.typed_parameters(raw, definitions)
    values = jobs.with_run_place(values, definitions, options["project"], options["location"])
    if code is not None:
        values = with_code(values, definitions, *code)
    if cron is not None:
        values = schedules.with_schedule_cron(values, definitions, cron, warn=False)
    try:
        request = jobs.PipelineJobRequest(
            project=options["project"],
            location=options["location"],
            template=template,
            pipeline_root=options["pipeline_root"],
            parameter_values=values,
            service_account=options["service_account"],
            labels=_pairs(options["labels"], "--label"),
            display_name=options["display_name"],
            enable_caching=options["enable_caching"],
            **extra,
        )
    except errors.SpecValidationError as refused:  # the first step's problems too, one pass
        if also:
            refused = errors.SpecValidationError(
                refused.what, refused.problems + also, refused.notes
            )
        raise first_step_check.with_its_problems(refused, spec, values) from None
    if also:
        refused = errors.SpecValidationError("schedule request", also)
        raise first_step_check.with_its_problems(refused, spec, values) from None
    resolved = request.resolved(registry.resolve_tag)
    if resolved.template != request.template:
        click.echo(f"template: {request.template} -> {resolved.template}", err=True)
    if spec is not None and first_step_check.check(spec, values):
        click.echo("checked: the parameters pass the pipeline's first step", err=True)
    if spec is not None and options["enable_caching"] is None:
        warning = caching.side_effect_caching_warning(spec)
        if warning:
            click.echo(warning, err=True)
    return resolved


def _warn_caching(enabled: bool | None) -> None:
    if enabled:
        click.echo(
            "warning: --enable-caching turns caching on for every task, teardown included: a "
            "run identical to an earlier one would skip deleting or labelling its cluster.",
            err=True,
        )


def _dry_run(method: str, path: str, body: dict[str, Any]) -> None:
    click.echo(f"dry run: {method} {path} (not sent)", err=True)
    click.echo(json.dumps(body, indent=2))


@click.command("submit", cls=common.VspCommand)
@_job_options
@click.option(
    "--job-id", default=None, help="pipelineJobId; default: <pipeline>-<UTC time>-<4 random hex>."
)
@click.option(
    "--code",
    "code_dir",
    default=None,
    type=click.Path(file_okay=False),
    help="Folder of the trainer's code: packed reproducibly, uploaded to PIPELINE_ROOT/"
    "vsp-code/SHA256.tar.gz and passed as code_uri and code_sha256 (in training_options).",
)
@common.handle_errors
def submit(job_id: str | None, code_dir: str | None, **options: Any) -> None:
    """Submit one run of a pipeline template to Vertex AI Pipelines."""
    package = code_pack.pack_folder(code_dir) if code_dir else None
    code = None
    if package is not None:
        code = (package.uri(options["pipeline_root"]), package.sha256)
    request = _job_request(options, code=code, job_id=job_id)
    _warn_caching(request.enable_caching)
    path = f"{jobs.API_VERSION}/{request.parent}/pipelineJobs"
    if options["dry_run"]:
        if package is not None:
            click.echo(
                f"dry run: would upload {code_dir} ({package.files} files, "
                f"{len(package.data)} bytes, sha256 {package.sha256}) to {code[0]} (not sent)",
                err=True,
            )
        _dry_run("POST", f"{path}?pipelineJobId={request.job_id}", request.body())
        return
    if package is not None:
        written = code_pack.upload(package, code[0])
        state = "uploaded" if written else "already there"
        click.echo(f"code: {code[0]} ({state}; sha256 {package.sha256})", err=True)
    client = jobs.PipelineJobsClient(common.client(request.location))
    job = client.create(request)
    click.echo(f"created: {job.get('name', request.name)}")
    click.echo(f"state: {job.get('state', 'unknown')}")
    url = jobs.console_url(request.project, request.location, request.job_id)
    click.echo(f"console: {url}")


@click.command("schedule", cls=common.VspCommand)
@_job_options
@click.option("--cron", required=True, help="5-field cron, optionally 'TZ=Zone ' first.")
@click.option("--max-concurrent-runs", default=1, show_default=True, type=int)
@click.option("--max-runs", default=None, type=int, help="Stop after N runs (default: never).")
@click.option("--start-time", default=None, help="RFC 3339, e.g. 2025-01-31T03:00:00Z.")
@click.option("--end-time", default=None, help="RFC 3339; no run starts after it.")
@click.option("--allow-queueing/--no-allow-queueing", default=None, help="Queue extra runs.")
@click.option(
    "--replace",
    is_flag=True,
    help="Replace a live schedule of the same name (deleted once this one exists).",
)
@common.handle_errors
def schedule(
    cron: str,
    max_concurrent_runs: int,
    max_runs: int | None,
    start_time: str | None,
    end_time: str | None,
    allow_queueing: bool | None,
    replace: bool,
    **options: Any,
) -> None:
    """Create a cron schedule of runs (refused when a live one has the same display name)."""
    own = schedule_times.problems(cron, max_concurrent_runs, max_runs, start_time, end_time)
    job = _job_request(options, cron=cron, also=own)
    _warn_caching(job.enable_caching)
    for warning in schedules.shared_folder_warnings(job.parameter_values):
        click.echo(f"warning: {warning}", err=True)
    request = schedules.ScheduleRequest(
        job=job,
        display_name=job.display_name or "",
        cron=cron,
        max_concurrent_run_count=max_concurrent_runs,
        max_run_count=max_runs,
        start_time=start_time,
        end_time=end_time,
        allow_queueing=allow_queueing,
    )
    if options["dry_run"]:
        _dry_run("POST", f"{jobs.API_VERSION}/{job.parent}/schedules", request.body())
        return
    client = schedules.SchedulesClient(common.client(job.location))
    created = client.create(request, replace=replace)
    click.echo(f"created: {created.get('name')}")
    click.echo(f"cron: {created.get('cron', cron)}  next run: {created.get('nextRunTime', '?')}")
    console = "https://console.cloud.google.com/vertex-ai/pipelines/schedules"
    click.echo(f"console: {console}?project={job.project}")
    # A teardown that weighs the schedule, or any step that may leave a cluster to its expiry.
    if schedules.SCHEDULE_CRON in job.parameter_values or templates.keeps_clusters(job.template):
        _check_reaper(client, job)


def _check_reaper(client: schedules.SchedulesClient, job: jobs.PipelineJobRequest) -> None:
    """Notes a missing reaper schedule, or one that does not read this pipeline's pre-warm
    requests, with the command that creates the one needed."""
    teardown = job.parameter_values.get("teardown_options") or {}
    prewarm_dir = teardown.get("prewarm_dir", "") if isinstance(teardown, dict) else ""
    reapers = client.reaper_parameters(job.parent)
    command = (
        f"vsp schedule --project {job.project} --location {job.location} --pipeline-root "
        f"{job.pipeline_root} --template {schedules.REAPER_PIPELINE} "
        f"--cron '{cadence.REAPER_CRON}' "
        f"--param project={job.project} --param location={job.location}"
    )
    if not reapers:
        extra = f" --param prewarm_dir={shlex.quote(prewarm_dir)}" if prewarm_dir else ""
        click.echo(
            f"note: this pipeline may keep its cluster warm until an expiry, and only "
            f"{schedules.REAPER_PIPELINE} deletes clusters whose expiry passed; no "
            f"active schedule of it exists in {job.location} (a paused one deletes nothing). "
            f"Create one (or resume yours): {command}{extra}",
            err=True,
        )
    elif prewarm_dir and all(r.get("prewarm_dir") != prewarm_dir for r in reapers):
        click.echo(
            f"note: teardown_options.prewarm_dir is {prewarm_dir}, but no "
            f"{schedules.REAPER_PIPELINE} schedule in {job.location} reads it, so a cluster "
            f"deleted for a pre-warm would not be re-created before the next run. Replace it: "
            f"{command} --param prewarm_dir={shlex.quote(prewarm_dir)} --replace",
            err=True,
        )
