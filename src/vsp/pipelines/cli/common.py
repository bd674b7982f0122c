"""Shared pieces of the ``vsp`` commands."""

from __future__ import annotations

import functools
import sys

import click
import yaml

from vsp.components.runtime.core import errors, rest


def handle_errors(func):
    """Turns runtime errors into a one-line message and the taxonomy's exit code."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except errors.VspError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)

    return wrapper


class VspCommand(click.Command):
    """A command that names every missing required option at once (click stops at the first,
    so a command line missing three took three tries)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)
        try:
            return super().parse_args(ctx, args)
        except click.MissingParameter:
            opts, _, _ = self.make_parser(ctx).parse_args(args=given)
            missing = [
                param
                for param in self.get_params(ctx)
                if param.required and param.value_is_missing(param.consume_value(ctx, opts)[0])
            ]
            if len(missing) < 2:
                raise
            names = ", ".join(f"'{param.opts[-1]}'" for param in missing)
            raise click.UsageError(f"Missing options {names}", ctx) from None


class VspGroup(click.Group):
    """The ``vsp`` group: click's own errors (unknown option, bad value, missing argument) in
    the same style and exit code as the runtime's user errors."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.Abort as exc:
            click.echo("error: interrupted", err=True)
            # 128 + the signal that stopped a local run (130 for SIGINT), else a cancel's code.
            sys.exit(getattr(exc.__context__, "exit_code", errors.EXIT_CANCELLED))
        except click.ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            usage = ctx.command_path if ctx is not None else "vsp"
            what = exc.format_message().rstrip(".")
            what += "" if what.endswith(("?", "!")) else "."  # "Did you mean '--x'?" ends too
            fix = "" if "Fix:" in what else f" Fix: see `{usage} --help`."
            click.echo(f"error: {what}{fix}", err=True)
            sys.exit(errors.EXIT_USER_ERROR)
        sys.exit(code if isinstance(code, int) else 0)


# A command waits at most this long for an endpoint that does not answer (a step waits longer).
COMMAND_RETRY = rest.RetryPolicy(initial=1.0, maximum=8.0, deadline=30.0)


def client(location: str) -> rest.VertexRestClient:
    """The REST client of a command: bounded retries, so an unreachable endpoint fails fast."""
    return rest.VertexRestClient(location, retry=COMMAND_RETRY, timeout=30.0)


def parse_params(values: tuple[str, ...], *, raw: bool = False) -> dict:
    """``NAME=VALUE`` options -> a dict; values are read as YAML unless ``raw``.

    Raises:
        errors.UserError: An item is not ``NAME=VALUE``.
    """
    params = {}
    for item in values:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise errors.UserError(
                f"--param {item!r} is not KEY=VALUE. Fix: write --param name=value."
            )
        if raw:
            params[key] = text
            continue
        try:
            params[key] = yaml.safe_load(text) if text else ""
        except yaml.YAMLError:
            params[key] = text
    return params


def credentials_error(what: str, exc: Exception) -> errors.UserError:
    """The user error for a Google call that found no usable credentials, with the fix."""
    return errors.UserError(f"{what}: {rest.credentials_problem(exc)}.")
