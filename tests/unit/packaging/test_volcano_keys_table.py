"""docs/scheduler.md's table of Volcano's keys names every Volcano name sluice accepts and
ignores, marked ignored, and every plugin and action sluice implements."""

from __future__ import annotations

import re
from pathlib import Path

from sluice.api import volcano
from sluice.api.config import ACTIONS
from sluice.api.plugins import PLUGINS

DOC = Path(__file__).parents[3] / "docs" / "scheduler.md"


def _rows() -> list[str]:
    text = DOC.read_text()
    section = text[text.index("## Volcano's keys, one by one") :]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    return lines[2:]  # after the header and its rule


def _named(row: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", row.split(" | ")[0]))


def test_every_ignored_volcano_name_has_a_row_that_says_ignored() -> None:
    ignored: set[str] = set()
    for row in _rows():
        if "**ignored**" in row:
            ignored |= _named(row)
    expected = (
        set(volcano.IGNORED_ACTIONS)
        | set(volcano.IGNORED_PLUGINS)
        | set(volcano.PLUGIN_SWITCHES)
        | set(volcano.IGNORED_TOP_LEVEL)
        | {key for args in volcano.IGNORED_PLUGIN_ARGUMENTS.values() for key in args}
        | {key for args in volcano.IGNORED_ACTION_ARGUMENTS.values() for key in args}
    )
    assert ignored >= expected, sorted(expected - ignored)


def test_every_volcano_switch_sluice_keeps_on_has_a_row_that_says_so() -> None:
    keys = {key for args in volcano.ALWAYS_ON_PLUGIN_ARGUMENTS.values() for key in args}
    for key in keys:
        rows = [row for row in _rows() if key in _named(row)]
        assert len(rows) == 1, key
        assert "**honoured** as `true`" in rows[0] and "`false` is **ignored**" in rows[0], key


def test_every_plugin_and_action_sluice_shares_with_volcano_has_a_row() -> None:
    named = set().union(*(_named(row) for row in _rows()))
    shared = (set(PLUGINS) | set(ACTIONS)) - {"proportion_optimize"}
    assert named >= shared, sorted(shared - named)
    assert "enableHierarchy" in named
    for row in _rows():
        assert re.search(r"\*\*(honoured|ignored|differs)\*\*", row), row
