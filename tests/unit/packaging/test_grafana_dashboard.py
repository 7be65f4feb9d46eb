"""The chart's Grafana dashboard queries only metrics that sluice exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from test_readme_metrics import exported

from sluice.operator.metrics import REGISTRY
from sluice.webhooks.metrics import WebhookMetrics

DASHBOARD = Path(__file__).resolve().parents[3] / "charts" / "sluice" / "files"


def test_every_panel_queries_exported_metrics() -> None:
    names = exported(REGISTRY) | exported(WebhookMetrics().registry)
    board = json.loads((DASHBOARD / "grafana-dashboard.json").read_text())
    assert board["panels"], "a dashboard without panels"
    used: set[str] = set()
    for panel in board["panels"]:
        exprs = [t["expr"] for t in panel["targets"]]
        assert exprs, panel["title"]
        for expr in exprs:
            found = set(re.findall(r"\b((?:sluice|process|python)_[a-z_]+)", expr))
            assert found, f"{panel['title']}: no metric in {expr}"
            for name in found:
                family = re.sub(r"_(bucket|count|sum)$", "", name)
                assert family in names, f"{panel['title']}: {name} is not exported"
            used |= found
    variable = board["templating"]["list"][1]["query"]["query"]
    assert "sluice_queue_info" in variable
    assert {"sluice_pending_jobs", "sluice_admission_wait_seconds_bucket"} <= used
