"""Shared pieces of the ``vsp`` commands."""

from __future__ import annotations

import functools
import sys

import click

from components.runtime import errors


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
