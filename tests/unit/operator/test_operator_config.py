"""The operator reads the scheduler ConfigMap: a stock Volcano configuration loads with one
ConfigIgnored Event and one log line per name it ignores; a bad one is refused and the last
good configuration stays."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from operator_fakes import fake_executor

from sluice.api.config import DEFAULT_CONFIG
from sluice.operator.loop import LoopSettings, SchedulingLoop

VOLCANO_DEFAULT = Path(__file__).parents[3] / "examples" / "volcano" / "volcano-scheduler.conf"


class ConfigMaps:
    def __init__(self) -> None:
        self.text: str | None = None

    def read_namespaced_config_map(self, name: str, namespace: str) -> client.V1ConfigMap:
        if self.text is None:
            raise ApiException(status=404, reason="NotFound")
        return client.V1ConfigMap(
            api_version="v1",
            kind="ConfigMap",
            metadata=client.V1ObjectMeta(name=name, namespace=namespace, uid="cm-uid"),
            data={"scheduler.yaml": self.text},
        )


class Leader:
    def holds(self) -> bool:
        return True


def loop_reading(maps: ConfigMaps) -> tuple[SchedulingLoop, list[dict[str, Any]]]:
    executor, cluster, state = fake_executor()
    loop = SchedulingLoop(client.ApiClient(), state, Leader(), LoopSettings(namespace="sluice"))  # type: ignore[arg-type]
    loop.executor = executor
    loop.core = maps  # type: ignore[assignment]
    return loop, cluster.events


def test_volcanos_default_loads_with_one_config_ignored_event_per_ignored_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    maps = ConfigMaps()
    maps.text = VOLCANO_DEFAULT.read_text()
    loop, events = loop_reading(maps)
    with caplog.at_level(logging.WARNING, logger="sluice.operator.loop"):
        loop.read_config()
        loop.executor.events.join()
    config = loop.state.config
    assert config.plugin_names() == ["priority", "gang", "drf", "proportion"]
    assert loop.state.config_error == ""
    assert len(config.warnings) == 7
    assert [e["reason"] for e in events] == ["ConfigIgnored"] * 7
    assert [e["message"] for e in events] == list(config.warnings)
    assert {e["involvedObject"]["kind"] for e in events} == {"ConfigMap"}
    assert {e["involvedObject"]["name"] for e in events} == {"sluice-scheduler"}
    logged = [r.getMessage() for r in caplog.records if "config-ignored" in r.getMessage()]
    assert len(logged) == 7 and "plugin predicates is ignored" in "".join(logged)
    loop.read_config()  # the same text again: nothing new is said
    loop.executor.events.join()
    assert len(events) == 7


def test_a_refused_configuration_keeps_the_last_good_one_and_says_why() -> None:
    maps = ConfigMaps()
    maps.text = "tiers:\n- plugins: [{name: capacity, enablePreemptible: false}]"
    loop, events = loop_reading(maps)
    loop.read_config()
    loop.executor.events.join()
    assert loop.state.config == DEFAULT_CONFIG
    assert [e["reason"] for e in events] == ["ConfigRefused"]
    assert "tiers[0].plugins[0].enablePreemptible" in events[0]["message"]
    assert events[0]["message"].endswith("the last good configuration stays in use")


def test_no_configmap_is_the_default_configuration_and_no_event() -> None:
    loop, events = loop_reading(ConfigMaps())
    loop.read_config()
    loop.executor.events.join()
    assert loop.state.config == DEFAULT_CONFIG and loop.config_text == "" and events == []
