"""What the sluice commands share: the kubeconfig option, logging, the error exit."""

from __future__ import annotations

import logging
from typing import Annotated, NoReturn

import typer

Kubeconfig = Annotated[
    str | None, typer.Option(help="Kubeconfig; default $KUBECONFIG, then in-cluster.")
]
LogLevel = Annotated[str, typer.Option(help="debug, info, warning or error.")]


def setup_logging(level: str) -> None:
    """Structured key=value lines, one per event."""
    logging.basicConfig(
        level=level.upper(),
        format="time=%(asctime)s level=%(levelname)s logger=%(name)s %(message)s",
    )
    logging.getLogger("kopf").setLevel(max(logging.WARNING, logging.getLogger().level))


def fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def group(app: typer.Typer, name: str, help: str) -> typer.Typer:
    sub = typer.Typer(help=help, no_args_is_help=True)
    app.add_typer(sub, name=name)
    return sub
