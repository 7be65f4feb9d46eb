"""docs/scheduler.md's *Devices (DRA)* section compares sluice's device accounting with
Kueue's and Volcano's, one row per question a platform engineer asks, every cell answered."""

from __future__ import annotations

from pathlib import Path

DOC = Path(__file__).parents[3] / "docs" / "scheduler.md"
QUESTIONS = (
    "What a device counts as",
    "A class no mapping names",
    "Claim templates",
    "A claim named directly (shareable)",
    "`firstAvailable`",
    "`allocationMode: All`",
    "Node room from ResourceSlices",
    "Extended resources a DeviceClass backs",
)


def _section() -> str:
    text = DOC.read_text()
    start = text.index("## Devices (DRA)")
    return text[start : text.index("\n## ", start + 1)]


def _table() -> list[list[str]]:
    rows = [line for line in _section().splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def test_the_devices_section_compares_sluice_kueue_and_volcano_on_each_question() -> None:
    header, rule, *rows = _table()
    assert header[1:] == ["sluice", "Kueue", "Volcano"]
    assert set(rule) == {"---"}
    assert [row[0] for row in rows] == list(QUESTIONS)
    for row in rows:
        assert len(row) == 4 and all(row), row


def test_it_names_the_peers_switches_and_versions() -> None:
    section = _section()
    for named in ("`capacity.DynamicResourceAllocationEnable`", "`KueueDRAIntegration`", "v0.18",
                  "v0.19", "`deviceClassMappings`", "`job-claims-immutable`"):  # fmt: skip
        assert named in section, named
