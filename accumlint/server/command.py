"""`accumlint server`: the command (imported only when run, since pygls is an extra)."""

from __future__ import annotations

import sys

import click

from accumlint.server.app import serve


@click.command("server")
def server_command() -> None:
    """Run the language server over standard input and output (for editors)."""
    sys.exit(serve())
