"""``sluice simulate``: the operator's scheduler, run offline over a dump of a cluster."""

from __future__ import annotations

import enum
import gc
import json
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from sluice.api.config import SchedulerConfig, parse_duration
from sluice.api.constants import CONFIGMAP_NAME
from sluice.api.errors import ConfigError
from sluice.cli.common import table_console
from sluice.cli.render import Simulation, render_table, to_json
from sluice.cli.sized import sized_workloads
from sluice.cli.snapshot_io import (
    Dump,
    SnapshotError,
    build_snapshot,
    load_config_file,
    load_objects,
)
from sluice.operator.memory import PAUSE, paused
from sluice.queues.lifecycle import QueueAction, lifecycle_actions
from sluice.queues.tree import QueueTree
from sluice.scheduler.cycle import apply_decisions, run_cycle
from sluice.scheduler.model import Decision

EXIT_BAD_INPUT = 2


class Output(enum.StrEnum):
    json = "json"
    table = "table"


def parse_now(value: str | None) -> datetime:
    if value is None:
        return datetime.now(UTC)
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise SnapshotError(
            f"--now: {value!r} is not an RFC 3339 time (e.g. 2026-01-01T12:00:00Z)"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def simulate_file(
    snapshot: Path,
    config: Path | None = None,
    cycles: int = 1,
    now: datetime | None = None,
    config_map_name: str = CONFIGMAP_NAME,
    *,
    report: bool = False,
) -> Simulation:
    """Run ``cycles`` cycles over a dump; each cycle sees the previous one's decisions applied.
    ``report``: also run the cycle that does nothing, whose view the HTML report starts from."""
    when = now or datetime.now(UTC)
    chosen = load_config_file(config) if config is not None else None
    dump = read_dump(snapshot, when, chosen, config_map_name)
    try:
        return paused(_simulate, dump, when, cycles, report)  # as the operator runs a pass
    finally:
        gc.unfreeze()  # the dump's objects are the collector's again once the command is done


def _simulate(dump: Dump, when: datetime, cycles: int, report: bool) -> Simulation:
    state = dump.snapshot
    untouched = replace(state, config=replace(state.config, actions=()))
    decisions: list[tuple[int, Decision]] = []
    # What the operator's Queue reconciler would write: the queues do not change across cycles.
    actions: list[QueueAction] = lifecycle_actions(QueueTree({q.name: q for q in state.queues}))
    queue_order: list[str] = []
    result = None
    for cycle in range(1, cycles + 1):
        result = run_cycle(state)
        if cycle == 1:
            queue_order = list(result.queue_order)
        decisions.extend((cycle, d) for d in result.decisions)
        state = apply_decisions(state, result, when)
    assert result is not None  # cycles >= 1
    return Simulation(
        queue_order=queue_order,
        final=result,
        decisions=decisions,
        queue_actions=actions,
        config_source=dump.config_source,
        cycles=cycles,
        initial=run_cycle(untouched) if report else None,
        queues={q.name: q for q in state.queues},
        config_warnings=dump.snapshot.config.warnings,
        forming=dump.forming,
        sized=sized_workloads(state),
    )


def read_dump(
    snapshot: Path,
    now: datetime,
    config: tuple[SchedulerConfig, str] | None,
    config_map_name: str,
) -> Dump:
    """The dump read into a Snapshot. Its objects, parsed and read, live until the command
    ends and hold no reference cycles: the garbage collector is paused while they are made
    (it would walk all of them again and again for nothing) and then told to leave them
    (``gc.freeze``) until ``simulate_file`` is done."""
    with PAUSE.held():
        dump = build_snapshot(load_objects(snapshot), now, config, config_map_name)
    gc.freeze()
    return dump


# The command's arguments and options, as typer reads them from the annotations.
SnapshotArg = Annotated[
    Path,
    typer.Argument(
        help="A YAML or JSON dump: `kubectl get queues,jobs,pods,nodes,priorityclasses,"
        "namespaces,deviceclasses,resourceslices,resourceclaims,resourceclaimtemplates,"
        "topologies,flavors -A -o yaml` (separate documents or kind: List).",
        show_default=False,
    ),
]

ConfigArg = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="Scheduler configuration (scheduler.yaml, or the sluice-scheduler ConfigMap "
        "manifest), including its deviceClassMappings (which DeviceClass counts as which "
        "quota resource). Without it, a sluice-scheduler ConfigMap in the dump is used, else "
        "the default configuration.",
        show_default=False,
    ),
]

CyclesArg = Annotated[
    int,
    typer.Option(
        "--cycles", min=1, help="Cycles to run; each applies the previous one's decisions."
    ),
]

NowArg = Annotated[
    str | None,
    typer.Option(
        "--now",
        help="The time the cycles run at, RFC 3339 (default: now); it decides which jobs "
        "minRuntime protects.",
        show_default=False,
    ),
]

OutputArg = Annotated[Output, typer.Option("--output", "-o", help="json or table.")]

ConfigMapNameArg = Annotated[
    str,
    typer.Option(
        "--config-map-name",
        help="The scheduler ConfigMap to use from the dump (a chart release's is"
        " <fullname>-scheduler).",
    ),
]

MinutesArg = Annotated[
    float | None,
    typer.Option(
        "--minutes",
        min=0,
        help="Run this many minutes of simulated time instead (a cycle every 10 s): jobs"
        " arrive when created, run for their sluice.dev/duration annotation (else"
        " --job-duration) once admitted, and each queue's wait is printed.",
        show_default=False,
    ),
]

JobDurationArg = Annotated[
    str | None,
    typer.Option(
        "--job-duration",
        help="With --minutes: how long a job without sluice.dev/duration runs (a"
        " duration such as 10m; default: to the end).",
        show_default=False,
    ),
]

HtmlArg = Annotated[
    Path | None,
    typer.Option(
        "--html",
        help="Also write the dashboard's views of the result to this file: one"
        " self-contained page, with each queue's deserved and allocated before and after.",
        show_default=False,
    ),
]


def simulate(
    snapshot: SnapshotArg,
    config: ConfigArg = None,
    cycles: CyclesArg = 1,
    now: NowArg = None,
    output: OutputArg = Output.table,
    config_map_name: ConfigMapNameArg = CONFIGMAP_NAME,
    minutes: MinutesArg = None,
    job_duration: JobDurationArg = None,
    html: HtmlArg = None,
) -> None:
    """Print what the scheduler would do with a cluster dump, and why. Needs no cluster."""
    if minutes is not None:
        _over_time(snapshot, minutes, config, now, job_duration, config_map_name, output)
        return
    try:
        sim = simulate_file(
            snapshot, config, cycles, parse_now(now), config_map_name, report=html is not None
        )
    except SnapshotError as err:
        print(f"error: {err}", file=sys.stderr)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    for warning in sim.config_warnings:
        print(f"warning: {sim.config_source}: {warning}", file=sys.stderr)
    if output is Output.json:
        sys.stdout.write(json.dumps(to_json(sim), indent=2) + "\n")
    else:
        render_table(sim, table_console())
    if html is not None:
        write_report(sim, html, f"sluice simulate {snapshot.name}, {cycles} cycle(s)")


def _over_time(
    snapshot: Path,
    minutes: float,
    config: Path | None,
    now: str | None,
    job_duration: str | None,
    config_map_name: str,
    output: Output,
) -> None:
    from sluice.cli import simulate_time

    try:
        default = parse_duration(job_duration, "--job-duration") if job_duration else None
        run = simulate_time.simulate_minutes(
            snapshot, minutes, config, parse_now(now), default, config_map_name
        )
    except (SnapshotError, ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    if output is Output.json:
        sys.stdout.write(json.dumps(simulate_time.to_json(run), indent=2) + "\n")
    else:
        for line in simulate_time.render(run):
            print(line)


def write_report(sim: Simulation, path: Path, title: str) -> None:
    from sluice.dashboard.report import render_html, report_data

    assert sim.initial is not None
    sized = [w.to_json() for w in sim.sized]
    data = report_data(sim.initial, sim.final, sim.decisions, sim.queues, title, sized)
    try:
        path.write_text(render_html(data))
    except OSError as err:
        print(f"error: cannot write {path}: {err}", file=sys.stderr)
        raise typer.Exit(1) from None
    print(f"wrote {path}", file=sys.stderr)


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate)
