"""`sluice simulate` plays partial admission and growth from a dump (docs/elastic.md, *Seen
everywhere*): a dumped resizable workload (its minimum, its record, its spec raised, its gated
pods) goes through the same cycle, and the table, the JSON and the --html page show it
admitted smaller and its growth waiting or admitted."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from typer.testing import CliRunner

from sluice.cli.main import _register, app
from sluice.cli.render import render_table, to_json
from sluice.cli.simulate import simulate_file
from sluice.dashboard.report import report_data

DUMP = Path(__file__).parent / "dumps" / "resizable.yaml"
NOW = datetime(2026, 11, 28, tzinfo=UTC)

_register()


def sized(data: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {w["job"]: (w["state"], w["size"], w["words"]) for w in data["resizable"]}


def test_a_dumped_resizable_workload_is_admitted_smaller_and_grows_through_its_queue() -> None:
    data = to_json(simulate_file(DUMP, None, 1, NOW))
    decisions = [(d["job"], d.get("sizes")) for d in data["decisions"]]
    assert decisions == [
        ("ml/wide", [{"podSet": "main", "asked": 8, "admitted": 6}]),
        ("ml/grown (growth)", [{"podSet": "main", "asked": 6, "admitted": 6}]),
    ]
    assert "admitted 6 of 8 workers (min 4)" in data["decisions"][0]["reason"]
    assert [(p["job"], p["reason"]) for p in data["pending"]] == [
        ("ml/held (growth)", "position 1 in tight; tight would use cpu 6 > capability 4")
    ]
    assert sized(data) == {
        "ml/wide": ("inqueue", "6/8", "admitted 6 of 8 pods (min 4)"),
        "ml/grown": ("running", "6/6", "admitted 6 of 6 pods (min 2)"),
        "ml/held": (
            "running",
            "4/6",
            "admitted 4 of 6 pods (min 2), growth of 2 pods waiting in its queue",
        ),
    }
    assert data["queues"]["grow"]["allocated"] == {"cpu": "6"}
    assert data["queues"]["tight"]["allocated"] == {"cpu": "4"}


def test_more_cycles_hold_what_the_first_decided() -> None:
    data = to_json(simulate_file(DUMP, None, 3, NOW))
    assert [d["cycle"] for d in data["decisions"]] == [1, 1]
    assert sized(data) == sized(to_json(simulate_file(DUMP, None, 1, NOW)))


def test_the_table_lists_the_resizable_workloads_with_their_sizes() -> None:
    console = Console(file=io.StringIO(), width=200)
    render_table(simulate_file(DUMP, None, 1, NOW), console)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "Resizable workloads" in text
    table = text[text.index("Resizable workloads") :]
    row = next(line for line in table.splitlines() if "ml/held " in line)
    assert "4/6" in row and "growth of 2 pods waiting in its queue" in row


def test_the_json_of_the_command_carries_the_sizes() -> None:
    now = "2026-11-28T00:00:00Z"
    result = CliRunner().invoke(app, ["simulate", str(DUMP), "--now", now, "-o", "json"])
    assert result.exit_code == 0, result.output
    held = next(w for w in json.loads(result.stdout)["resizable"] if w["job"] == "ml/held")
    assert held["podSets"] == [
        {"name": "main", "admitted": 4, "asked": 6, "minimum": 2, "waiting": 2}
    ]


def test_the_html_page_shows_sizes_in_the_queues_and_the_timeline() -> None:
    sim = simulate_file(DUMP, None, 1, NOW, report=True)
    assert sim.initial is not None
    rows = [w.to_json() for w in sim.sized]
    data = report_data(sim.initial, sim.final, sim.decisions, sim.queues, "t", rows)
    team = {j["name"]: (j["state"], j["size"]) for j in data["jobs"]["team"]}
    assert team == {"wide": ("inqueue", "6/8")}
    tight = {j["name"]: (j["state"], j["size"], j["sizeWords"]) for j in data["jobs"]["tight"]}
    assert tight["held (growth)"] == (
        "pending",
        "4/6",
        "admitted 4 of 6 pods (min 2), growth of 2 pods waiting in its queue",
    )
    assert tight["held"][:2] == ("running", "4/6")
    shown = {t["job"]: t.get("size") for t in data["tree"]["timeline"]}
    assert shown == {"ml/wide": "6 of 8 pods", "ml/grown (growth)": "6 of 6 pods"}
