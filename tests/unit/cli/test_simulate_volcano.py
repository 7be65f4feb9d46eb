"""`sluice simulate` with what a Volcano user brings: Volcano's own scheduler configurations
and GPU-only quotas."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from sluice.cli.main import _register, app

EXAMPLES = Path(__file__).parents[3] / "examples"
NOW = "2026-03-02T09:00:00Z"

_register()
runner = CliRunner()


def test_volcano_configs_load_and_each_ignored_name_is_one_line_on_stderr() -> None:
    for name, count in (("volcano-scheduler.conf", 7), ("capacity.conf", 7)):
        config = EXAMPLES / "volcano" / name
        args = ["simulate", str(EXAMPLES / "cluster.yaml"), "--config", str(config)]
        result = runner.invoke(app, [*args, "--now", NOW, "-o", "json"])
        assert result.exit_code == 0, result.output
        json.loads(result.stdout)  # warnings never reach the output itself
        lines = result.stderr.splitlines()
        assert len(lines) == count, lines
        assert all(line.startswith(f"warning: {config}: ") for line in lines)
        assert any("plugin binpack is ignored: kube-scheduler places" in line for line in lines)
