"""The scheduler configuration, in Volcano's shape.

Read from ConfigMap ``sluice-scheduler``, key ``scheduler.yaml``.

Everything unknown is an error that names its key: a typo in a plugin argument must not
silently turn a feature off. What Volcano itself knows but sluice does not implement
(``sluice/api/volcano.py``) is accepted with one warning each, so that a stock
``volcano-scheduler.conf`` loads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final, Literal

import yaml

from sluice.api import volcano
from sluice.api.device_quota import MAPPING_KEY, DeviceMapping
from sluice.api.errors import ConfigError
from sluice.api.plugins import PLUGINS

ACTIONS: Final = ("enqueue", "allocate", "reclaim", "preempt", "backfill")
SCORE_PLUGINS: Final = tuple(
    p.name for p in PLUGINS.values() if p.queue_order not in (None, "usage")
)
"""Plugins that contribute a queue score under QueueScoreOrderEnable (usage orders before
the score: docs/scheduler.md, *Usage over time*)."""

DEFAULT_ACTIONS: Final = ("enqueue", "allocate", "reclaim", "backfill")
DEFAULT_PODS_READY_TIMEOUT: Final = timedelta(minutes=5)
DEFAULT_TIERS: Final = (("priority", "gang"), ("drf", "proportion"))
DEFAULT_HALF_LIFE: Final = timedelta(hours=1)
DEFAULT_ENTRY_PENALTY: Final = timedelta(minutes=1)

_ORDER_ACTIONS: Final = ("enqueue", "allocate", "reclaim", "preempt")
_HIERARCHY_KEYS: Final = ("enableHierarchy", "enabledHierarchy")
"""Volcano's YAML key, and the spelling sluice first accepted (kept as an alias)."""
_PLUGIN_KEYS: Final = ("name", "arguments", *_HIERARCHY_KEYS)

JobOrder = Literal["queue", "global"]
PriorityType = Literal["Guarantee", "Weight"]


@dataclass(frozen=True, slots=True)
class ActionArguments:
    queue_score_order: bool = False
    score_weights: Mapping[str, float] = field(default_factory=dict)
    job_order: JobOrder = "queue"
    min_runtime: timedelta = timedelta(0)

    def score_weight(self, plugin: str) -> float:
        """A plugin's QueueScoreOrder weight; 1 when not configured (Volcano's default)."""
        return self.score_weights.get(plugin, 1.0)


@dataclass(frozen=True, slots=True)
class PluginConfig:
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def flag(self, key: str, default: bool) -> bool:
        value = self.arguments.get(key)
        return default if value is None else bool(value)


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    actions: tuple[str, ...] = DEFAULT_ACTIONS
    tiers: tuple[tuple[PluginConfig, ...], ...] = tuple(
        tuple(PluginConfig(name) for name in tier) for tier in DEFAULT_TIERS
    )
    action_arguments: Mapping[str, ActionArguments] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    """What was accepted and is ignored, one line each: ``<key>: ... is ignored: <why>``."""
    pods_ready_timeout: timedelta = DEFAULT_PODS_READY_TIMEOUT
    """An admitted job whose pods are not all scheduled this long is requeued; 0: never."""
    device_mapping: DeviceMapping = field(default_factory=DeviceMapping)
    """DeviceClass -> the quota resource its devices count as (``deviceClassMappings``,
    docs/scheduler.md, *Devices (DRA)*)."""

    def arguments(self, action: str) -> ActionArguments:
        return self.action_arguments.get(action, ActionArguments())

    def plugin(self, name: str) -> PluginConfig | None:
        for tier in self.tiers:
            for plugin in tier:
                if plugin.name == name:
                    return plugin
        return None

    def plugin_names(self) -> list[str]:
        return [plugin.name for tier in self.tiers for plugin in tier]

    def deserved_plugin(self) -> PluginConfig | None:
        """The plugin that computes deserved: the first in tier order that does."""
        for tier in self.tiers:
            for plugin in tier:
                if PLUGINS[plugin.name].deserved:
                    return plugin
        return None

    @property
    def elastic(self) -> bool:
        """Whether a queue may take more than its deserved (ElasticEnable, true unless a
        plugin that has the switch turns it off)."""
        return all(
            plugin.flag("ElasticEnable", True)
            for tier in self.tiers
            for plugin in tier
            if PLUGINS[plugin.name].elastic_switch
        )

    @property
    def usage(self) -> UsageSettings | None:
        """The usage plugin's settings; None when it is not configured or its half-life is 0
        (then nothing about usage is kept, and the order is today's)."""
        plugin = self.plugin("usage")
        if plugin is None:
            return None
        args = plugin.arguments
        settings = UsageSettings(
            half_life=args.get("halfLife", DEFAULT_HALF_LIFE),
            entry_penalty=args.get("entryPenalty", DEFAULT_ENTRY_PENALTY),
            resource_weights=args.get("resourceWeights", {}),
        )
        return settings if settings.half_life > timedelta(0) else None


@dataclass(frozen=True, slots=True)
class UsageSettings:
    """The usage plugin's arguments (docs/scheduler.md, *Usage over time*)."""

    half_life: timedelta = DEFAULT_HALF_LIFE
    entry_penalty: timedelta = DEFAULT_ENTRY_PENALTY
    """An admitted job counts as if it had already held its request this long."""
    resource_weights: Mapping[str, float] = field(default_factory=dict)
    """Resource -> weight of its usage (normalized by the cluster's total); absent: 1."""

    def weight(self, resource: str) -> float:
        return self.resource_weights.get(resource, 1.0)


DEFAULT_CONFIG: Final = SchedulerConfig()


def load_scheduler_config(text: str) -> SchedulerConfig:
    """Parse ``scheduler.yaml``; an empty document is the default configuration."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError("scheduler.yaml", f"not valid YAML{where}") from None
    if raw is None:
        return DEFAULT_CONFIG
    return parse_scheduler_config(raw)


def parse_scheduler_config(raw: Any) -> SchedulerConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError(
            "scheduler.yaml", "expected a mapping with actions, tiers, configurations"
        )
    warnings: list[str] = []
    for key in raw:
        if key in volcano.IGNORED_TOP_LEVEL:
            warnings.append(f"{key}: ignored: {volcano.IGNORED_TOP_LEVEL[key]}")
        elif key not in _TOP_KEYS:
            raise ConfigError(str(key), f"unknown key (expected {', '.join(_TOP_KEYS)})")
    actions = _parse_actions(raw.get("actions"), warnings)
    tiers = _parse_tiers(raw.get("tiers"), warnings)
    arguments = _parse_configurations(raw.get("configurations"), warnings)
    timeout = raw.get("podsReadyTimeout")
    return SchedulerConfig(
        actions=actions,
        tiers=tiers,
        action_arguments=arguments,
        warnings=tuple(warnings),
        pods_ready_timeout=(
            DEFAULT_PODS_READY_TIMEOUT
            if timeout is None
            else parse_duration(timeout, "podsReadyTimeout")
        ),
        device_mapping=DeviceMapping.parse(raw.get(MAPPING_KEY)),
    )


_TOP_KEYS: Final = ("actions", "tiers", "configurations", "podsReadyTimeout", MAPPING_KEY)


def _parse_actions(raw: Any, warnings: list[str]) -> tuple[str, ...]:
    if raw is None:
        return DEFAULT_ACTIONS
    if isinstance(raw, str):
        names = [part.strip() for part in raw.split(",") if part.strip()]
    elif isinstance(raw, list):
        names = [str(part).strip() for part in raw]
    else:
        raise ConfigError("actions", "expected a comma-separated string")
    if not names:
        raise ConfigError("actions", "no action given")
    if len(set(names)) != len(names):
        raise ConfigError("actions", "an action is listed twice")
    kept: list[str] = []
    for name in names:
        if name in volcano.IGNORED_ACTIONS:
            warnings.append(
                f"actions.{name}: action {name} is ignored: {volcano.IGNORED_ACTIONS[name]}"
            )
        elif name in ACTIONS:
            kept.append(name)
        else:
            raise ConfigError(f"actions.{name}", f"unknown action (known: {', '.join(ACTIONS)})")
    if not kept:
        raise ConfigError("actions", f"no action sluice implements (known: {', '.join(ACTIONS)})")
    return tuple(kept)


def _parse_tiers(raw: Any, warnings: list[str]) -> tuple[tuple[PluginConfig, ...], ...]:
    if raw is None:
        return DEFAULT_CONFIG.tiers
    if not isinstance(raw, list):
        raise ConfigError("tiers", "expected a list of {plugins: [...]}")
    seen: set[str] = set()
    tiers: list[tuple[PluginConfig, ...]] = []
    for t, tier in enumerate(raw):
        if not isinstance(tier, Mapping) or set(tier) - {"plugins"}:
            raise ConfigError(f"tiers[{t}]", "expected {plugins: [...]}")
        plugins = tier.get("plugins") or []
        if not isinstance(plugins, list):
            raise ConfigError(f"tiers[{t}].plugins", "expected a list")
        parsed: list[PluginConfig] = []
        for p, plugin in enumerate(plugins):
            where = f"tiers[{t}].plugins[{p}]"
            if not isinstance(plugin, Mapping) or "name" not in plugin:
                raise ConfigError(where, "expected {name: ...}")
            name = str(plugin["name"])
            if name not in PLUGINS and name not in volcano.IGNORED_PLUGINS:
                raise ConfigError(
                    f"{where}.name", f"unknown plugin {name!r} (known: {', '.join(PLUGINS)})"
                )
            if name in seen:
                raise ConfigError(f"{where}.name", f"plugin {name!r} is listed twice")
            seen.add(name)
            ignored = name in volcano.IGNORED_PLUGINS
            if ignored:
                warnings.append(
                    f"{where}.name: plugin {name} is ignored: {volcano.IGNORED_PLUGINS[name]}"
                )
            _plugin_switches(name, plugin, where, None if ignored else warnings)
            if not ignored:
                arguments = _plugin_arguments(name, plugin.get("arguments"), where, warnings)
                parsed.append(PluginConfig(name, arguments))
        tiers.append(tuple(parsed))
    if "proportion" in seen and "capacity" in seen:
        raise ConfigError("tiers", "proportion and capacity both compute deserved; enable one")
    return tuple(tiers)


def _plugin_switches(
    name: str, plugin: Mapping[str, Any], where: str, warnings: list[str] | None
) -> None:
    """Check a plugin's keys; warn about the switches sluice ignores (``warnings`` None: the
    whole plugin is ignored and has been warned about already)."""
    for key in plugin:
        at = f"{where}.{key}"
        if key in _PLUGIN_KEYS:
            continue
        if key not in volcano.PLUGIN_SWITCHES:
            raise ConfigError(
                at,
                f"unknown key (known: {', '.join(_PLUGIN_KEYS)} and Volcano's enable*"
                " switches, which sluice ignores)",
            )
        _as_bool(plugin[key], at)
        if warnings is not None:
            warnings.append(f"{at}: {name}'s switch {key} is ignored: {volcano.SWITCH_REASON}")
    given = [key for key in _HIERARCHY_KEYS if key in plugin]
    if len(given) > 1:
        raise ConfigError(
            f"{where}.enabledHierarchy", "the same switch as enableHierarchy; give one of them"
        )
    for key in given:
        on = _as_bool(plugin[key], f"{where}.{key}")
        if not on and warnings is not None:
            warnings.append(f"{where}.{key}: false is ignored: {volcano.HIERARCHY_OFF_REASON}")


def _plugin_arguments(name: str, raw: Any, where: str, warnings: list[str]) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}.arguments", "expected a mapping")
    allowed = PLUGINS[name].arguments
    theirs = volcano.IGNORED_PLUGIN_ARGUMENTS.get(name, {})
    always_on = volcano.ALWAYS_ON_PLUGIN_ARGUMENTS.get(name, {})
    out: dict[str, Any] = {}
    for written, value in raw.items():
        at = f"{where}.arguments.{written}"
        if written in theirs:
            warnings.append(f"{at}: {name}'s argument {written} is ignored: {theirs[written]}")
            continue
        if written in always_on:
            if not _as_bool(value, at):
                warnings.append(f"{at}: false is ignored: {always_on[written]}")
            continue
        # Written with the plugin prefix (proportion_optimize.GuaranteeEnable) or without.
        key = str(written).removeprefix(f"{name}.")
        if key not in allowed:
            known = ", ".join(allowed) if allowed else "none"
            raise ConfigError(at, f"unknown argument of {name} (known: {known})")
        if key in ("halfLife", "entryPenalty"):
            out[key] = parse_duration(value, at)
        elif key == "resourceWeights":
            if not isinstance(value, Mapping):
                raise ConfigError(at, "expected a mapping of resource name to weight")
            out[key] = {str(r): _as_number(w, f"{at}.{r}") for r, w in value.items()}
        elif key == "PriorityType":
            if value not in ("Guarantee", "Weight"):
                raise ConfigError(at, "expected Guarantee or Weight")
            out[key] = value
        else:
            out[key] = _as_bool(value, at)
    return out


def _parse_configurations(raw: Any, warnings: list[str]) -> Mapping[str, ActionArguments]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ConfigError("configurations", "expected a list of {name, arguments}")
    out: dict[str, ActionArguments] = {}
    for i, entry in enumerate(raw):
        where = f"configurations[{i}]"
        if (
            not isinstance(entry, Mapping)
            or "name" not in entry
            or set(entry) - {"name", "arguments"}
        ):
            raise ConfigError(where, "expected {name: <action>, arguments: {...}}")
        action = str(entry["name"]).rstrip(":")
        if action in volcano.IGNORED_ACTIONS:
            warnings.append(
                f"{where}.name: action {action} is ignored: {volcano.IGNORED_ACTIONS[action]}"
            )
            continue
        if action not in ACTIONS:
            raise ConfigError(
                f"{where}.name", f"unknown action {action!r} (known: {', '.join(ACTIONS)})"
            )
        if action in out:
            raise ConfigError(f"{where}.name", f"action {action!r} is configured twice")
        out[action] = _action_arguments(
            action, entry.get("arguments") or {}, f"{where}.arguments", warnings
        )
    return out


_SCORE_KEY = re.compile(r"^QueueScoreOrder\.(?P<plugin>[a-z_]+)\.weight$")


def _action_arguments(action: str, raw: Any, where: str, warnings: list[str]) -> ActionArguments:
    if not isinstance(raw, Mapping):
        raise ConfigError(where, "expected a mapping")
    score_order = False
    weights: dict[str, float] = {}
    job_order: JobOrder = "queue"
    min_runtime = timedelta(0)
    for key, value in raw.items():
        at = f"{where}.{key}"
        match = _SCORE_KEY.match(str(key))
        if action in _ORDER_ACTIONS and key == "QueueScoreOrderEnable":
            score_order = _as_bool(value, at)
        elif action in _ORDER_ACTIONS and match and match["plugin"] in SCORE_PLUGINS:
            weights[match["plugin"]] = _as_number(value, at)
        elif action in _ORDER_ACTIONS and key == "jobOrder":
            if value not in ("queue", "global"):
                raise ConfigError(at, "expected queue or global")
            job_order = value
        elif action == "reclaim" and key == "minRuntime":
            min_runtime = parse_duration(value, at)
        elif key in (theirs := volcano.IGNORED_ACTION_ARGUMENTS.get(action, {})):
            warnings.append(f"{at}: {action}'s argument {key} is ignored: {theirs[key]}")
        else:
            raise ConfigError(at, f"unknown argument of {action}")
    return ActionArguments(score_order, weights, job_order, min_runtime)


def _as_bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(where, f"expected true or false, got {value!r}")


def _as_number(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise ConfigError(where, f"expected a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(where, f"expected a number, got {value!r}") from None
    if number < 0 or number != number:
        raise ConfigError(where, "expected a number >= 0")
    return number


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS: Final = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_duration(value: Any, where: str = "duration") -> timedelta:
    """A Go-style duration: ``90s``, ``10m``, ``1h30m``, ``1.5h``, ``0``."""
    text = str(value).strip()
    if text == "0":
        return timedelta(0)
    pos = 0
    seconds = 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        seconds += float(match[1]) * _UNIT_SECONDS[match[2]]
        pos = match.end()
    if pos != len(text) or not text:
        raise ConfigError(where, f"{value!r} is not a duration (e.g. 90s, 10m, 1h30m)")
    return timedelta(seconds=seconds)


def format_duration(value: timedelta) -> str:
    """A duration as Go writes it and parse_duration reads it: ``5m``, ``1h30m``, ``90ms``."""
    total = value.total_seconds()
    if total == 0:
        return "0s"
    if total < 1:
        return f"{total * 1000:g}ms"
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    out = f"{int(hours)}h" if hours else ""
    if minutes or (hours and seconds):
        out += f"{int(minutes)}m"
    if seconds:
        out += f"{seconds:g}s"
    return out
