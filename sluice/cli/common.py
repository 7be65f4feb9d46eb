"""What the sluice commands share: the kubeconfig option, logging, the error exit, the table
console."""

from __future__ import annotations

import logging
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from sluice.api.views import JOB_KIND
from sluice.api.workloads import BY_KIND

PIPED_WIDTH = 200

Kubeconfig = Annotated[
    str | None, typer.Option(help="Kubeconfig; default $KUBECONFIG, then in-cluster.")
]
KubeContext = Annotated[
    str | None,
    typer.Option("--context", help="Kubeconfig context to use; default its current context."),
]
LogLevel = Annotated[str, typer.Option(help="debug, info, warning or error.")]
WorkloadKinds = Annotated[
    list[str] | None,
    typer.Option(
        "--workload-kind",
        help="A kind of workload to gate, once per kind (docs/workloads.md): "
        + ", ".join(BY_KIND)
        + ". Default: Job.",
    ),
]


def workload_kinds(given: list[str] | None) -> frozenset[str]:
    """The kinds of workload to gate (--workload-kind): Job when none is given."""
    kinds = frozenset(given or (JOB_KIND,))
    unknown = sorted(kinds - set(BY_KIND))
    if unknown:
        fail(f"--workload-kind {unknown[0]}: not a kind sluice gates ({', '.join(BY_KIND)})")
    return kinds


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


def table_console() -> Console:
    """Tables as wide as the terminal; piped or redirected, wide enough that no cell is cut.

    $COLUMNS is not trusted off a terminal: a parent process that loaded readline exports
    COLUMNS=80 to every child, which would fold a script's or a log's copy of the table.
    """
    console = Console(soft_wrap=False)
    if not console.is_terminal:
        console = Console(soft_wrap=False, width=PIPED_WIDTH)
    return console
