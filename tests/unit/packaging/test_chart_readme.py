"""The chart's README.md values table is what hack/chart-readme writes from values.yaml's
comments and values.schema.json, and the script refuses a value either file leaves out."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "charts" / "sluice"
SCRIPT = REPO / "hack" / "chart-readme"


def chart_readme(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def chart(tmp_path: Path) -> Path:
    for name in ("values.yaml", "values.schema.json", "README.md"):
        shutil.copy(CHART / name, tmp_path / name)
    return tmp_path


def test_the_chart_readme_is_up_to_date() -> None:
    result = chart_readme("--check")
    assert result.returncode == 0, result.stderr
    readme = (CHART / "README.md").read_text()
    # Types and limits come from the schema, defaults and descriptions from values.yaml.
    assert (
        "| `webhooks.timeoutSeconds` | integer (1..30) | `5` | How long the API server waits"
    ) in readme
    assert '| `webhooks.failurePolicy` | string (Fail, Ignore) | `"Fail"` |' in readme


def test_a_changed_comment_makes_the_check_fail_until_the_table_is_written(chart: Path) -> None:
    values = chart / "values.yaml"
    values.write_text(
        values.read_text().replace(
            "# Replicas of the stateless webhook server.", "# How many webhook servers run."
        )
    )
    stale = chart_readme("--check", "--chart", str(chart))
    assert stale.returncode == 1
    assert "README.md is out of date: run hack/chart-readme" in stale.stderr
    assert chart_readme("--chart", str(chart)).returncode == 0
    assert chart_readme("--check", "--chart", str(chart)).returncode == 0
    assert "| `webhooks.replicas` | integer (>= 1) | `2` | How many webhook servers run. |" in (
        (chart / "README.md").read_text().replace("&gt;", ">")
    )


def test_a_value_without_comment_or_schema_is_refused(chart: Path) -> None:
    values = chart / "values.yaml"
    original = values.read_text()
    values.write_text(original.replace("  replicas: 2\n", "  replicas: 2\n  surge: 1\n", 1))
    undocumented = chart_readme("--check", "--chart", str(chart))
    assert undocumented.returncode == 2
    assert "operator.surge: no comment above it in values.yaml" in undocumented.stderr

    values.write_text(
        original.replace("  replicas: 2\n", "  replicas: 2\n  # Extra.\n  surge: 1\n", 1)
    )
    unschemaed = chart_readme("--check", "--chart", str(chart))
    assert unschemaed.returncode == 2
    assert "operator.surge: not described by values.schema.json" in unschemaed.stderr

    values.write_text(original)
    schema_path = chart / "values.schema.json"
    schema = json.loads(schema_path.read_text())
    schema["properties"]["webhooks"]["properties"]["surge"] = {"type": "integer"}
    schema_path.write_text(json.dumps(schema))
    valueless = chart_readme("--check", "--chart", str(chart))
    assert valueless.returncode == 2
    assert "webhooks.surge: in values.schema.json, not in values.yaml" in valueless.stderr
