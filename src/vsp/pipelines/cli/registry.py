"""``vsp publish`` and a registry tag's resolution: Artifact Registry KFP repositories.

``publish`` uploads a compiled template to a repository; ``resolve_tag`` gives the version a
tag points to (``vsp submit`` and ``vsp schedule`` pin a tag so the run records what ran). The
calls always go to Google through kfp's ``RegistryClient``, never to the local emulator; their
failures map onto the error taxonomy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click
import requests

from vsp.components.runtime.core import errors
from vsp.pipelines.cli import common
from vsp.pipelines.vertex import templates


def _registry_call(what: str, call: Callable[[Any], Any], host: str) -> Any:
    """Runs ``call(RegistryClient(host))`` with its failures mapped onto the error taxonomy."""
    import google.auth.exceptions  # noqa: PLC0415
    from kfp import registry  # noqa: PLC0415 - kfp import is slow

    try:
        return call(registry.RegistryClient(host=host))
    except google.auth.exceptions.GoogleAuthError as exc:
        raise common.credentials_error(what, exc) from exc
    except requests.RequestException as exc:
        response = getattr(exc, "response", None)
        status = response.status_code if response is not None else 0
        if status == 404:
            raise errors.UserError(
                f"{what}: not found. Fix: check the name, or `vsp publish` it."
            ) from exc
        if status in (401, 403):
            raise errors.UserError(
                f"{what}: permission denied ({status}). Fix: grant roles/artifactregistry.reader "
                "(resolve) or roles/artifactregistry.writer (publish) on the repository."
            ) from exc
        if status == 0 or status in errors.TRANSIENT_HTTP_STATUSES:
            raise errors.TransientError(
                f"{what}: {type(exc).__name__} ({status or 'no answer'})"
            ) from exc
        raise errors.UserError(f"{what}: Artifact Registry answered {status}.") from exc


def resolve_tag(host: str, package: str, tag: str) -> str:
    """The version a tag points to (``RegistryClient.get_tag``'s ``version`` name)."""
    what = f"tag {tag!r} of {host}/{package}"
    return _registry_call(what, lambda client: client.get_tag(package, tag)["version"], host)


def _upload(host: str) -> templates.Uploader:
    def upload(path: str, tags: list[str]) -> tuple[str, str]:
        return _registry_call(
            f"upload of {path} to {host}",
            lambda client: client.upload_pipeline(path, tags=tags, extra_headers=None),
            host,
        )

    return upload


@click.command("publish")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--host", required=True, help="https://REGION-kfp.pkg.dev/PROJECT/REPO")
@click.option("--tag", "tags", multiple=True, help="Tag to attach (repeat); moves if taken.")
@common.handle_errors
def publish(file: str, host: str, tags: tuple[str, ...]) -> None:
    """Upload a compiled pipeline YAML to an Artifact Registry KFP repository."""
    published = templates.publish(file, host, list(tags), _upload(host.rstrip("/")))
    click.echo(f"package: {published.package}")
    click.echo(f"version: {published.version}")
    click.echo(f"templateUri: {published.template_uri}")
    for uri in published.tag_uris:
        click.echo(f"tag: {uri}")
