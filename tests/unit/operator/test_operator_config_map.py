"""The scheduler ConfigMap's name is the operator's to be told (`--config-map-name`): two
releases in one namespace each read their own, and a run outside the chart keeps the
documented default."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from typer.testing import CliRunner

from sluice.api.constants import CONFIGMAP_NAME
from sluice.cli.main import _register, app
from sluice.operator.exiting import STOP_SECONDS
from sluice.operator.loop import LoopSettings, SchedulingLoop
from sluice.operator.run import OperatorOptions
from sluice.operator.state import ClusterState

if not app.registered_groups:
    _register()


class Elector:
    is_leader = False

    def holds(self) -> bool:
        return False


class Core:
    """Two releases' ConfigMaps side by side in one namespace."""

    def __init__(self) -> None:
        self.reads: list[tuple[str, str]] = []
        self.data = {
            "sluice-scheduler": "actions: enqueue, allocate, reclaim, backfill\n",
            "b-sluice-scheduler": "actions: enqueue, allocate\n",
        }

    def read_namespaced_config_map(self, name: str, namespace: str) -> client.V1ConfigMap:
        self.reads.append((name, namespace))
        return client.V1ConfigMap(data={"scheduler.yaml": self.data[name]})


def test_the_loop_reads_the_config_map_it_was_given() -> None:
    settings = LoopSettings(namespace="shared", config_map_name="b-sluice-scheduler")
    loop = SchedulingLoop(client.ApiClient(), ClusterState(), Elector(), settings)  # type: ignore[arg-type]
    core = Core()
    loop.config.core = core  # type: ignore[assignment]
    loop.config.read()
    assert core.reads == [("b-sluice-scheduler", "shared")]
    assert loop.state.config.actions == ("enqueue", "allocate")


@pytest.mark.parametrize(
    ("flags", "field", "expected"),
    [
        ([], "config_map_name", CONFIGMAP_NAME),
        (["--config-map-name", "b-sluice-scheduler"], "config_map_name", "b-sluice-scheduler"),
        ([], "stop_seconds", STOP_SECONDS),
        (["--stop-seconds", "25"], "stop_seconds", 25.0),
    ],
)
def test_operator_run_threads_its_flags_into_the_options(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], field: str, expected: object
) -> None:
    seen: list[OperatorOptions] = []

    async def run_operator(api: Any, options: OperatorOptions) -> None:
        seen.append(options)

    monkeypatch.setattr("sluice.operator.run.run_operator", run_operator)
    monkeypatch.setattr("sluice.kube.api_client", lambda kubeconfig: object())
    result = CliRunner().invoke(app, ["operator", "run", *flags])
    assert result.exit_code == 0, result.output
    assert [getattr(o, field) for o in seen] == [expected]
