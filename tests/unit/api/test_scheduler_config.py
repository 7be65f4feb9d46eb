"""The scheduler configuration: Volcano's shape, defaults, and errors that name the key."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from sluice.api.config import (
    DEFAULT_CONFIG,
    SchedulerConfig,
    load_scheduler_config,
    parse_duration,
)
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


EXAMPLES = Path(__file__).parents[3] / "examples" / "volcano"


def _warned_keys(config: SchedulerConfig) -> list[str]:
    return [warning.split(": ", 1)[0] for warning in config.warnings]


def test_volcanos_default_configuration_loads_with_one_warning_per_ignored_name() -> None:
    config = load_scheduler_config((EXAMPLES / "volcano-scheduler.conf").read_text())
    assert config.actions == ("enqueue", "allocate", "backfill")
    assert config.plugin_names() == ["priority", "gang", "drf", "proportion"]
    assert _warned_keys(config) == [
        "tiers[0].plugins[1].enablePreemptable",
        "tiers[0].plugins[2].name",
        "tiers[1].plugins[0].name",
        "tiers[1].plugins[1].enablePreemptable",
        "tiers[1].plugins[2].name",
        "tiers[1].plugins[4].name",
        "tiers[1].plugins[5].name",
    ]
    assert (
        "tiers[1].plugins[2].name: plugin predicates is ignored: kube-scheduler places the pods"
        " of admitted jobs; sluice only decides which jobs run"
    ) in config.warnings


def test_volcanos_capacity_plugin_configuration_loads_with_the_hierarchy_on() -> None:
    config = load_scheduler_config((EXAMPLES / "capacity.conf").read_text())
    assert config.actions == ("enqueue", "allocate", "backfill", "reclaim")
    assert config.plugin_names() == ["priority", "gang", "drf", "capacity"]
    capacity = config.plugin("capacity")
    assert capacity is not None and capacity.arguments == {}
    assert "tiers[1].plugins[2].arguments.ancestorReclaimLevel" in _warned_keys(config)
    assert not any("enableHierarchy" in warning for warning in config.warnings)


@pytest.mark.parametrize("key", ["enableHierarchy", "enabledHierarchy"])
def test_enable_hierarchy_is_volcanos_key_and_the_old_spelling_an_alias(key: str) -> None:
    on = load_scheduler_config(f"tiers:\n- plugins: [{{name: capacity, {key}: true}}]")
    assert on.plugin_names() == ["capacity"] and on.warnings == ()
    off = load_scheduler_config(f"tiers:\n- plugins: [{{name: capacity, {key}: false}}]")
    assert off.warnings == (
        f"tiers[0].plugins[0].{key}: false is ignored: sluice always schedules the queue tree"
        " that spec.parent draws (queues that all sit under root are a tree of depth one)",
    )


_DRA_SWITCH = "capacity.DynamicResourceAllocationEnable"


@pytest.mark.parametrize("value", ["true", '"true"', "True"])
def test_volcanos_dra_quota_switch_on_is_what_sluice_does_and_loads_silently(value: str) -> None:
    config = load_scheduler_config(
        f"tiers:\n- plugins: [{{name: capacity, arguments: {{{_DRA_SWITCH}: {value}}}}}]"
    )
    capacity = config.plugin("capacity")
    assert capacity is not None and capacity.arguments == {}
    assert config.warnings == ()


@pytest.mark.parametrize("value", ["false", '"false"'])
def test_volcanos_dra_quota_switch_off_warns_that_claims_are_still_counted(value: str) -> None:
    config = load_scheduler_config(
        f"tiers:\n- plugins: [{{name: capacity, arguments: {{{_DRA_SWITCH}: {value}}}}}]"
    )
    assert config.plugin_names() == ["capacity"]
    assert config.warnings == (
        f"tiers[0].plugins[0].arguments.{_DRA_SWITCH}: false is ignored: sluice always counts"
        " the devices pods ask through DRA claims in their queues, so that no claim escapes a"
        " queue's capability (docs/scheduler.md, *Devices (DRA)*)",
    )


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (
            f"tiers:\n- plugins: [{{name: capacity, arguments: {{{_DRA_SWITCH}: maybe}}}}]",
            f"tiers[0].plugins[0].arguments.{_DRA_SWITCH}",
        ),
        # Volcano reads it only as the capacity plugin's argument, under its full key.
        (
            "tiers:\n- plugins: [{name: capacity, arguments:"
            " {DynamicResourceAllocationEnable: true}}]",
            "tiers[0].plugins[0].arguments.DynamicResourceAllocationEnable",
        ),
        (
            f"tiers:\n- plugins: [{{name: proportion, arguments: {{{_DRA_SWITCH}: true}}}}]",
            f"tiers[0].plugins[0].arguments.{_DRA_SWITCH}",
        ),
    ],
)
def test_volcanos_dra_quota_switch_elsewhere_or_not_a_bool_is_refused(text: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_scheduler_config(text)
    assert caught.value.key == key


def test_volcano_names_sluice_does_not_implement_are_warned_about_once_each() -> None:
    config = load_scheduler_config(
        """
actions: "enqueue, allocate, gangreclaim, reclaim, shuffle"
metrics: {type: prometheus}
configurations:
- name: preempt
  arguments: {predicateErrorCacheEnable: true, minCandidateNodesPercentage: 10}
- name: gangreclaim
  arguments: {maxDomains: 2}
- name: reclaim
  arguments: {minRuntime: 5m, predicateErrorCacheEnable: false}
tiers:
- plugins:
  - {name: priority, enableJobOrder: false}
  - {name: sla, arguments: {sla-waiting-time: 1h}}
- plugins:
  - {name: capacity, arguments: {capacity.DynamicResourceAllocationEnable: true}}
"""
    )
    assert config.actions == ("enqueue", "allocate", "reclaim")
    assert config.plugin_names() == ["priority", "capacity"]
    assert config.arguments("reclaim").min_runtime == timedelta(minutes=5)
    assert _warned_keys(config) == [
        "metrics",
        "actions.gangreclaim",
        "actions.shuffle",
        "tiers[0].plugins[0].enableJobOrder",
        "tiers[0].plugins[1].name",
        "configurations[0].arguments.predicateErrorCacheEnable",
        "configurations[0].arguments.minCandidateNodesPercentage",
        "configurations[1].name",
        "configurations[2].arguments.predicateErrorCacheEnable",
    ]


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("tiers:\n- plugins: [{name: predicate}]", "tiers[0].plugins[0].name"),
        (
            "tiers:\n- plugins: [{name: gang, enablePreemptible: false}]",
            "tiers[0].plugins[0].enablePreemptible",
        ),
        (
            "tiers:\n- plugins: [{name: gang, enablePreemptable: maybe}]",
            "tiers[0].plugins[0].enablePreemptable",
        ),
        (
            "tiers:\n- plugins: [{name: predicates, enablePredicates: true}]",
            "tiers[0].plugins[0].enablePredicates",
        ),
        (
            "tiers:\n- plugins: [{name: capacity, enableHierarchy: yes please}]",
            "tiers[0].plugins[0].enableHierarchy",
        ),
        (
            "tiers:\n- plugins: [{name: capacity, enableHierarchy: true, enabledHierarchy: true}]",
            "tiers[0].plugins[0].enabledHierarchy",
        ),
        (
            "tiers:\n- plugins: [{name: capacity, arguments: {ancestorReclaimLevels: 1}}]",
            "tiers[0].plugins[0].arguments.ancestorReclaimLevels",
        ),
        (
            "tiers:\n- plugins: [{name: drf, arguments: {ancestorReclaimLevel: 1}}]",
            "tiers[0].plugins[0].arguments.ancestorReclaimLevel",
        ),
        ('actions: "enqueue, shufle"', "actions.shufle"),
        ('actions: "shuffle"', "actions"),
        (
            "configurations:\n- name: allocate\n  arguments: {predicateErrorCacheEnabled: true}",
            "configurations[0].arguments.predicateErrorCacheEnabled",
        ),
        (
            "configurations:\n- name: enqueue\n  arguments: {predicateErrorCacheEnable: true}",
            "configurations[0].arguments.predicateErrorCacheEnable",
        ),
        ("metric: {}", "metric"),
    ],
)
def test_what_neither_sluice_nor_volcano_knows_is_still_refused(text: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_scheduler_config(text)
    assert caught.value.key == key
