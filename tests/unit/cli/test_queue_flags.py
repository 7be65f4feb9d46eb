"""Flag parsing and rendering of the `sluice queue` commands (no cluster needed)."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest
from rich.console import Console
from typer.testing import CliRunner

from sluice.cli.main import _register, app
from sluice.cli.queue import DequeueStrategy
from sluice.cli.queue_view import (
    FlagError,
    parse_resources,
    queue_table,
    queue_tree,
    spec_from_flags,
    subtree,
)


def test_resource_flags_are_checked_and_kept_as_typed() -> None:
    assert parse_resources("--capability", "cpu=4, memory=8Gi") == {"cpu": "4", "memory": "8Gi"}
    with pytest.raises(FlagError, match="--capability: 'cpu' is not resource=quantity"):
        parse_resources("--capability", "cpu")
    with pytest.raises(FlagError, match="--deserved: gpu: 'x' is not a quantity"):
        parse_resources("--deserved", "gpu=x")


def test_only_given_flags_reach_the_spec() -> None:
    assert spec_from_flags(weight=3, parent=None, guarantee="cpu=1", reclaimable=False) == {
        "weight": 3,
        "reclaimable": False,
        "guarantee": {"resource": {"cpu": "1"}},
    }


QUEUES = [
    {"metadata": {"name": "root"}, "spec": {}, "status": {"state": "Open"}},
    {
        "metadata": {"name": "dept", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"parent": "root", "weight": 2},
        "status": {
            "state": "Open",
            "allocated": {"cpu": "1500m"},
            "deserved": {"cpu": "4"},
            "share": 0.375,
        },
    },
    {
        "metadata": {"name": "team", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "parent": "dept",
            "priority": 5,
            "namespaceSelector": {"matchLabels": {"team": "t"}},
        },
        "status": {"state": "Closing", "pending": 2, "running": 1, "inqueue": 1},
    },
]


def text(renderable: object) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=160).print(renderable)
    return buffer.getvalue()


def test_table_shows_kubectl_like_columns() -> None:
    out = text(queue_table(QUEUES, now=datetime(2026, 1, 1, 2, tzinfo=UTC)))
    header = out.splitlines()[0].split()
    assert header == [
        "NAME",
        "STATE",
        "PARENT",
        "WEIGHT",
        "PRIORITY",
        "PENDING",
        "RUNNING",
        "ALLOCATED",
        "NAMESPACES",
        "AGE",
    ]
    team = next(line for line in out.splitlines() if line.startswith("team")).split()
    assert team == ["team", "Closing", "dept", "1", "5", "2", "2", "-", "team=t", "2h"]
    assert "cpu=1500m" in out


def test_tree_draws_the_hierarchy_with_shares() -> None:
    out = text(queue_tree(QUEUES, "root"))
    lines = out.splitlines()
    assert lines[0].startswith("root")
    assert "dept Open weight=2 deserved=cpu=4 allocated=cpu=1500m share=0.38" in out
    assert lines[-1].strip().endswith("share=0.00") and "team Closing" in lines[-1]
    assert subtree(QUEUES, "dept") == ["dept", "team"]


def test_bad_flag_values_name_the_flag_before_any_api_call() -> None:
    _register()
    runner = CliRunner()
    nowhere = "--kubeconfig=/nonexistent/kubeconfig"
    cases = {
        ("--weight", "0"): "--weight",
        ("--priority", "-1"): "--priority",
        ("--dequeue-strategy", "lifo"): "--dequeue-strategy",
        ("--capability", "cpu=four"): "--capability: cpu:",
        ("--guarantee", "memory"): "--guarantee: 'memory' is not resource=quantity",
    }
    for (flag, value), expected in cases.items():
        result = runner.invoke(app, ["queue", "create", "q", flag, value, nowhere])
        assert result.exit_code in (1, 2), (flag, result.output)
        assert expected in result.output, (flag, result.output)
    fifo = spec_from_flags(dequeue_strategy=DequeueStrategy.fifo)
    assert fifo == {"dequeueStrategy": "fifo"} and type(fifo["dequeueStrategy"]) is str
