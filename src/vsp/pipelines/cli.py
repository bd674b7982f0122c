"""The ``vsp`` command line: compile, run-local, emulator and clusters.

Errors follow the runtime's taxonomy in one style, ``error: <what is wrong>. Fix: ...`` on
stderr: a user error (a bad option or parameter included) exits 2, a transient error exits 75,
anything unexpected exits 70 with a traceback in the log.
"""

from __future__ import annotations

import logging
import os

import click

from vsp.pipelines import cli_common
from vsp.vertex_emulator.slurm import real as real_slurm_api

log = logging.getLogger("vsp")


@click.group(cls=cli_common.VspGroup)
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
    help="A prebuilt image with kfp and the runtime requirements (built from image/Dockerfile; "
    "README: 'Prebuilt step image'); default: a stock Python image with pip installs at step "
    "start.",
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


@main.group()
def emulator() -> None:
    """The local Vertex emulator."""


@emulator.command("start")
@click.option("--state-dir", required=True, help="Folder holding the emulator's state.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8618, show_default=True, type=int)
@click.option(
    "--provisioning-seconds",
    type=float,
    default=None,
    help="Seconds a new cluster stays PROVISIONING [default: the saved setting, else 3].",
)
@click.option(
    "--slurmrestd",
    default=None,
    help="Forward every cluster's Slurm Job API to this real slurmrestd (unix socket path or "
    "http://HOST:PORT; JWT from $VSP_REAL_SLURMRESTD_TOKEN); '' = emulate Slurm [default: the "
    "saved setting, else emulate].",
)
@click.option(
    "--preemption-mechanism",
    type=click.Choice(real_slurm_api.PREEMPTION_MECHANISMS),
    default=None,
    help="With --slurmrestd: how injected Spot preemptions are made on the real Slurm "
    "[default: the saved setting, else partition].",
)
@click.option(
    "--reset-settings",
    is_flag=True,
    help="Start from the default settings instead of those saved in the state folder.",
)
@cli_common.handle_errors
def emulator_start(
    state_dir: str,
    host: str,
    port: int,
    provisioning_seconds: float | None,
    slurmrestd: str | None,
    preemption_mechanism: str | None,
    reset_settings: bool,
) -> None:
    """Serve the emulator in the foreground until interrupted.

    The settings saved in the state folder (``settings.json``: every setting changed through
    the control API or an earlier start) are kept; the options given here change only their
    own setting, and --reset-settings starts from the defaults.
    """
    from vsp import vertex_emulator as server  # noqa: PLC0415
    from vsp.vertex_emulator import config  # noqa: PLC0415

    state = os.path.abspath(state_dir)
    try:
        changes = {
            "provisioning_delay_seconds": provisioning_seconds,
            "slurmrestd": real_slurm_api.check_address(slurmrestd) if slurmrestd else slurmrestd,
            "slurmrestd_preemption": preemption_mechanism,
        }
        saved = None if reset_settings else config.load_settings(state)
        base = saved or server.EmulatorSettings()
        settings = base.replace(**{k: v for k, v in changes.items() if v is not None})
    except ValueError as exc:
        raise click.UsageError(
            f"{exc}. Fix: correct the option, or pass --reset-settings."
        ) from exc
    server.serve(state, host, port, settings)


from vsp.pipelines import cli_clusters, cli_run_local  # noqa: E402  (registers commands)

main.add_command(cli_run_local.run_local_command)

main.add_command(cli_clusters.clusters)

from vsp.pipelines import cli_vertex  # noqa: E402  (registers `submit`, `schedule`, `publish`)

for _command in (cli_vertex.submit, cli_vertex.schedule, cli_vertex.publish):
    main.add_command(_command)
