"""Reading the scheduler ConfigMap into the state, and saying on it what was refused or
ignored (docs/operations.md, *A configuration change was ignored*)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kubernetes import client

from sluice.api.config import load_scheduler_config
from sluice.api.constants import CONFIGMAP_KEY
from sluice.api.errors import ConfigError
from sluice.kube.errors import API_ERRORS, Failure, classify, message
from sluice.operator import metrics
from sluice.operator.state import ClusterState
from sluice.operator.writes import EventSpec

# The loop's logger: the configuration's log lines read as they always have.
log = logging.getLogger("sluice.operator.loop")

PostEvent = Callable[[dict[str, Any], EventSpec, str], None]
"""Posts an Event about an object of a kind (``Executor.post_event``)."""


class ConfigReader:
    def __init__(
        self,
        api: client.ApiClient,
        state: ClusterState,
        namespace: str,
        name: str,
        post_event: PostEvent,
    ) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.state = state
        self.namespace = namespace
        self.name = name
        self.post_event = post_event
        self.text: str | None = None
        """The text last loaded; None until the ConfigMap has been read once."""

    def read(self) -> None:
        """Load the scheduler ConfigMap; on error keep the last good configuration."""
        cm: Any = None
        try:
            cm = self.core.read_namespaced_config_map(self.name, self.namespace)
            text = (cm.data or {}).get(CONFIGMAP_KEY, "")
        except API_ERRORS as err:
            if classify(err) is not Failure.GONE:
                log.warning("event=config-read-failed error=%s", message(err))
                return
            text = ""
        if text == self.text:
            return
        self.text = text
        try:
            config = load_scheduler_config(text)
        except ConfigError as err:
            self.state.config_error = str(err)
            metrics.CONFIG_ERRORS.inc()
            log.error("event=config-refused error=%r keeping=last-good", str(err))
            self._events(cm, "ConfigRefused", [f"{err}; the last good configuration stays in use"])
            return
        self.state.set_config(config)
        self.state.config_error = ""
        log.info(
            "event=%s configmap=%s/%s",
            "config-loaded" if text else "config-default",
            self.namespace,
            self.name,
        )
        for warning in config.warnings:
            log.warning("event=config-ignored warning=%r", warning)
        if config.warnings:
            self._events(cm, "ConfigIgnored", list(config.warnings))

    def _events(self, cm: Any, reason: str, messages: list[str]) -> None:
        """One Event on the ConfigMap per message (a refusal, or each ignored name)."""
        if cm is None:
            return  # no ConfigMap, nothing refused or ignored
        obj: dict[str, Any] = self.api.sanitize_for_serialization(cm)  # type: ignore[no-untyped-call]
        obj.setdefault("apiVersion", "v1")
        for text in messages:
            self.post_event(obj, EventSpec(reason, text, warning=True), "ConfigMap")
