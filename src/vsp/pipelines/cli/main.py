"""The ``vsp`` command group, ``vsp compile``, and the other groups' commands added to it.

Errors follow the runtime's taxonomy in one style, ``error: <what is wrong>. Fix: ...`` on
stderr: a user error (a bad option or parameter included) exits 2, a transient error exits 75,
anything unexpected exits 70 with a traceback in the log.
"""

from __future__ import annotations

import logging

import click

from vsp.pipelines.cli import clusters, common, emulator, registry, run_local, vertex

log = logging.getLogger("vsp")


@click.group(cls=common.VspGroup)
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
@click.option(
    "--out",
    "out_dir",
    default="compiled",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Output folder.",
)
@click.option(
    "--base-image",
    default=None,
    help="A prebuilt image with kfp and the runtime requirements (built from image/Dockerfile; "
    "docs/running-on-vertex.md, 'The prebuilt step image'); default: a stock Python image "
    "with pip installs at step start.",
)
@common.handle_errors
def compile_command(out_dir: str, base_image: str | None) -> None:
    """Compile every pipeline and component into YAML templates."""
    from vsp.components import packaging  # noqa: PLC0415 - kfp import is slow
    from vsp.pipelines.definitions import compile  # noqa: PLC0415

    options = packaging.STOCK_IMAGE
    if base_image:
        options = packaging.ImageOptions(base_image=base_image, install_packages=False)
    for path in compile.compile_all(out_dir, options):
        click.echo(f"wrote {path}")


main.add_command(emulator.emulator)
main.add_command(run_local.run_local_command)
main.add_command(clusters.clusters)
for _command in (vertex.submit, vertex.schedule, registry.publish):
    main.add_command(_command)
