"""The scheduler configuration: Volcano's shape, defaults, and errors that name the key."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sluice.api.config import DEFAULT_CONFIG, load_scheduler_config, parse_duration
from sluice.api.errors import ConfigError

VOLCANO_SHAPED = """
actions: "enqueue, allocate, reclaim, preempt, backfill"
configurations:
- name: enqueue
  arguments: {QueueScoreOrderEnable: true, QueueScoreOrder.priority.weight: 2,
              QueueScoreOrder.drf.weight: 1, jobOrder: global}
- name: reclaim
  arguments: {minRuntime: 1h30m}
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins:
  - name: drf
    enabledHierarchy: true
  - name: proportion_optimize
    arguments: {GuaranteeEnable: true, ElasticEnable: false, PriorityType: Weight}
"""


def test_default_when_empty() -> None:
    config = load_scheduler_config("")
    assert config == DEFAULT_CONFIG
    assert config.actions == ("enqueue", "allocate", "reclaim", "backfill")
    assert config.plugin_names() == ["priority", "gang", "drf", "proportion"]


def test_volcano_shaped_yaml() -> None:
    config = load_scheduler_config(VOLCANO_SHAPED)
    assert config.actions[-2:] == ("preempt", "backfill")
    enqueue = config.arguments("enqueue")
    assert enqueue.queue_score_order and enqueue.job_order == "global"
    assert enqueue.score_weight("priority") == 2 and enqueue.score_weight("proportion") == 1
    assert config.arguments("reclaim").min_runtime == timedelta(hours=1, minutes=30)
    optimize = config.plugin("proportion_optimize")
    assert optimize is not None and optimize.arguments["PriorityType"] == "Weight"
    assert not optimize.flag("ElasticEnable", True)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('actions: "enqueue, teleport"', "actions.teleport"),
        ("tiers:\n- plugins: [{name: magic}]", "tiers[0].plugins[0].name"),
        ("tiers:\n- plugins: [{name: drf, colour: red}]", "tiers[0].plugins[0].colour"),
        (
            "tiers:\n- plugins: [{name: drf, arguments: {x: 1}}]",
            "tiers[0].plugins[0].arguments.x",
        ),
        (
            "configurations:\n- name: enqueue\n  arguments: {bogus: 1}",
            "configurations[0].arguments.bogus",
        ),
        ("configurations:\n- name: warp", "configurations[0].name"),
        (
            "configurations:\n- name: reclaim\n  arguments: {minRuntime: soon}",
            "configurations[0].arguments.minRuntime",
        ),
        ("extra: 1", "extra"),
        ("actions: [", "scheduler.yaml"),
    ],
)
def test_errors_name_the_key(text: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_scheduler_config(text)
    assert caught.value.key == key
    assert key in str(caught.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", timedelta(0)),
        ("90s", timedelta(seconds=90)),
        ("10m", timedelta(minutes=10)),
        ("1h30m", timedelta(minutes=90)),
        ("1.5h", timedelta(minutes=90)),
        ("250ms", timedelta(milliseconds=250)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "10", "1d", "m", "10 m", "-5s"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ConfigError, match="not a duration"):
        parse_duration(text)


def test_proportion_optimize_arguments_may_carry_the_plugin_prefix() -> None:
    from sluice.api.config import load_scheduler_config

    config = load_scheduler_config(
        """
tiers:
- plugins:
  - name: proportion_optimize
    arguments:
      proportion_optimize.GuaranteeEnable: true
      proportion_optimize.PriorityType: Guarantee
"""
    )
    optimize = config.plugin("proportion_optimize")
    assert optimize is not None
    assert optimize.arguments == {"GuaranteeEnable": True, "PriorityType": "Guarantee"}
