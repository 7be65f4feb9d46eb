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
from sluice.api.constants import CONFIGMAP_NAME
from sluice.operator.executor import Executor
from sluice.operator.scheduler_config import ConfigReader

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


def config_reading(maps: ConfigMaps) -> tuple[ConfigReader, Executor, list[dict[str, Any]]]:
    """A reader of the ConfigMap in ``maps`` whose Events go to the fake cluster."""
    executor, cluster, state = fake_executor()
    reader = ConfigReader(client.ApiClient(), state, "sluice", CONFIGMAP_NAME, executor.post_event)
    reader.core = maps  # type: ignore[assignment]
    return reader, executor, cluster.events


def test_volcanos_default_loads_with_one_config_ignored_event_per_ignored_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    maps = ConfigMaps()
    maps.text = VOLCANO_DEFAULT.read_text()
    reader, executor, events = config_reading(maps)
    with caplog.at_level(logging.WARNING, logger="sluice.operator.loop"):
        reader.read()
        executor.events.join()
    config = reader.state.config
    assert config.plugin_names() == ["priority", "gang", "drf", "proportion"]
    assert reader.state.config_error == ""
    assert len(config.warnings) == 7
    assert [e["reason"] for e in events] == ["ConfigIgnored"] * 7
    assert [e["message"] for e in events] == list(config.warnings)
    assert {e["involvedObject"]["kind"] for e in events} == {"ConfigMap"}
    assert {e["involvedObject"]["name"] for e in events} == {"sluice-scheduler"}
    logged = [r.getMessage() for r in caplog.records if "config-ignored" in r.getMessage()]
    assert len(logged) == 7 and "plugin predicates is ignored" in "".join(logged)
    reader.read()  # the same text again: nothing new is said
    executor.events.join()
    assert len(events) == 7


def test_a_refused_configuration_keeps_the_last_good_one_and_says_why() -> None:
    maps = ConfigMaps()
    maps.text = "tiers:\n- plugins: [{name: capacity, enablePreemptible: false}]"
    reader, executor, events = config_reading(maps)
    reader.read()
    executor.events.join()
    assert reader.state.config == DEFAULT_CONFIG
    assert [e["reason"] for e in events] == ["ConfigRefused"]
    assert "tiers[0].plugins[0].enablePreemptible" in events[0]["message"]
    assert events[0]["message"].endswith("the last good configuration stays in use")


def test_no_configmap_is_the_default_configuration_and_no_event() -> None:
    reader, executor, events = config_reading(ConfigMaps())
    reader.read()
    executor.events.join()
    assert reader.state.config == DEFAULT_CONFIG and reader.text == "" and events == []
