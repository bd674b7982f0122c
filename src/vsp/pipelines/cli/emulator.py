"""``vsp emulator``: the local Vertex emulator as a server of its own."""

from __future__ import annotations

import errno
import os

import click

from vsp.components.runtime.core import errors
from vsp.pipelines.cli import common
from vsp.vertex_emulator import server as emulator_server
from vsp.vertex_emulator.slurm import real as real_slurm_api


@click.group()
def emulator() -> None:
    """The local Vertex emulator."""


@emulator.command("start")
@click.option("--state-dir", required=True, help="Folder holding the emulator's state.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8618, show_default=True, type=click.IntRange(0, 65535))
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
@common.handle_errors
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
    from vsp import vertex_emulator  # noqa: PLC0415
    from vsp.vertex_emulator import config  # noqa: PLC0415

    state = os.path.abspath(state_dir)
    try:
        changes = {
            "provisioning_delay_seconds": provisioning_seconds,
            "slurmrestd": real_slurm_api.check_address(slurmrestd) if slurmrestd else slurmrestd,
            "slurmrestd_preemption": preemption_mechanism,
        }
        saved = None if reset_settings else config.load_settings(state)
        base = saved or vertex_emulator.EmulatorSettings()
        settings = base.replace(**{k: v for k, v in changes.items() if v is not None})
    except ValueError as exc:
        raise click.UsageError(
            f"{exc}. Fix: correct the option, or pass --reset-settings."
        ) from exc
    try:
        vertex_emulator.serve(state, host, port, settings)
    except emulator_server.StateDirInUse as exc:
        raise errors.UserError(f"{exc}. Fix: stop it, or pass another --state-dir.") from None
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        raise errors.UserError(
            f"port {port} on {host} is in use. Fix: pass another --port, or --port 0 for a free "
            "one (printed as VERTEX_EMULATOR_HOST)."
        ) from None
