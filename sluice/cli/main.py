"""The ``sluice`` command: one entry point, a sub-command group per component."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="sluice",
    help="Kubernetes-native queue manager for multi-tenant batch and AI clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _group() -> None:
    """Kubernetes-native queue manager for multi-tenant batch and AI clusters."""
    # A callback keeps `sluice` a command group even while a single command is registered;
    # without it typer would turn `sluice simulate X` into `sluice X`.


def _register() -> None:
    # Each component adds its commands to the app; kept in one place so `sluice --help`
    # lists everything and a missing component fails loudly at start-up.
    from sluice.cli import dashboard, job, operator, queue, simulate, webhooks

    simulate.register(app)
    queue.register(app)
    job.register(app)
    webhooks.register(app)
    operator.register(app)
    dashboard.register(app)


def main() -> None:
    _register()
    app()


if __name__ == "__main__":
    main()
