"""The Lease holder's writes to sluice's own custom objects: Queues, Topologies, Flavors, and
the kinds that come next. Every kind gets the same policy, so a new kind is one
``CustomKind`` record:

- Each failure is read by the one classifier (``sluice.kube.errors``). What may succeed later
  raises ``Retry``. A refusal is logged and not repeated, unless the caller asks for it to be
  retried (a reserved queue's create); then it is logged once per reason.
- Nothing is written once ``may_write`` says the Lease is no longer held.
- Each answer goes into the cluster state at once, so the next reconcile reads what was
  written, not what the watch has brought so far.
- The writes run on their own threads: a thousand statuses after a pass must not queue ahead
  of the scheduling loop's work in the event loop's shared pool.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

from kubernetes import client

from sluice.api.constants import (
    FLAVOR_KIND,
    FLAVOR_PLURAL,
    GROUP,
    PLURAL,
    TOPOLOGY_KIND,
    TOPOLOGY_PLURAL,
    VERSION,
)
from sluice.api.objects import Obj
from sluice.kube.errors import API_ERRORS, Failure, classify, message
from sluice.kube.writer import MERGE_PATCH, WRITERS
from sluice.operator import metrics
from sluice.operator.events import EventSink, post_event
from sluice.operator.state import ClusterState

log = logging.getLogger("sluice.operator.queues")

GONE_IS_DONE = frozenset({Failure.GONE})
"""By default a write to an object that no longer exists leaves nothing to do."""


class Retry(Exception):
    """What may succeed later: the object is reconciled again after a pause."""


@dataclass(frozen=True)
class CustomKind:
    """One kind of sluice's custom objects, as its writer needs it."""

    kind: str
    """As Events name it."""
    plural: str
    label: str
    """The kind in log keys and refusal records."""
    metric_prefix: str
    """Put before the write's name in ``sluice_api_writes_total``'s label."""
    remember: Callable[[ClusterState, Obj], None]
    """Stores a written object's answer in the cluster state."""


QUEUES = CustomKind("Queue", PLURAL, "queue", "", lambda state, obj: state.remember_queue(obj))
TOPOLOGIES = CustomKind(
    TOPOLOGY_KIND,
    TOPOLOGY_PLURAL,
    "topology",
    "topology-",
    lambda state, obj: state.on_topology("MODIFIED", obj),
)
FLAVORS = CustomKind(
    FLAVOR_KIND,
    FLAVOR_PLURAL,
    "flavor",
    "flavor-",
    lambda state, obj: state.on_flavor("MODIFIED", obj),
)


class CustomWriter:
    """Writes sluice's custom objects, any kind, with one policy (module docstring)."""

    def __init__(
        self,
        api: client.ApiClient,
        state: ClusterState,
        may_write: Callable[[], bool] = lambda: True,
    ) -> None:
        self.objects = client.CustomObjectsApi(api)
        self.state = state
        self.may_write = may_write
        self.pool = ThreadPoolExecutor(WRITERS, thread_name_prefix="sluice-queues")
        core = client.CoreV1Api(api)
        self.events = EventSink(lambda namespace, body: post_event(core, namespace, body))
        self.refusals: dict[str, str] = {}
        """The last refusal logged of each write that is retried when refused."""

    async def call(
        self,
        kind: CustomKind,
        what: str,
        name: str,
        call: Callable[[], Any],
        done: frozenset[Failure] = GONE_IS_DONE,
        retry_refused: bool = False,
    ) -> Obj | None:
        """The answer, or None when ``done`` holds the failure (nothing left to do) or the
        write was refused for good. ``retry_refused``: a refusal raises ``Retry`` too."""
        label = kind.label
        if not self.may_write():
            raise Retry(f"{what} of {label} {name}: the Lease is not held")
        try:
            answer = await asyncio.get_running_loop().run_in_executor(self.pool, call)
        except API_ERRORS as err:
            failure = classify(err)
            if failure in done:
                return None
            said, key = message(err), f"{label}/{name}/{what}"
            if failure in (Failure.REFUSED, Failure.FORBIDDEN):
                if not retry_refused or self.refusals.get(key) != said:
                    log.warning("event=%s-write-refused %s=%s what=%s retried=%s reason=%s",
                                label, label, name, what, retry_refused, said)  # fmt: skip
                if not retry_refused:
                    return None
                self.refusals[key] = said
            raise Retry(f"{what} of {label} {name}: {failure.value} ({said})") from err
        if retry_refused:
            self.refusals.pop(f"{label}/{name}/{what}", None)
        metrics.API_WRITES.labels(f"{kind.metric_prefix}{what}").inc()
        obj = cast(Obj, answer)
        if what != "delete":  # a deletion answers with a Status or with the object
            kind.remember(self.state, obj)
        return obj

    async def patch(self, kind: CustomKind, name: str, body: dict[str, Any], what: str) -> None:
        await self.call(
            kind,
            what,
            name,
            lambda: self.objects.patch_cluster_custom_object(
                GROUP, VERSION, kind.plural, name, body, _content_type=MERGE_PATCH
            ),
        )

    async def patch_status(self, kind: CustomKind, name: str, status: dict[str, Any]) -> bool:
        """Whether it was written (not when the object is gone, or the write refused)."""
        written = await self.call(
            kind,
            "status",
            name,
            lambda: self.objects.patch_cluster_custom_object_status(
                GROUP, VERSION, kind.plural, name, {"status": status}, _content_type=MERGE_PATCH
            ),
        )
        return written is not None

    async def create(
        self,
        kind: CustomKind,
        name: str,
        body: dict[str, Any],
        done: frozenset[Failure] = GONE_IS_DONE,
        retry_refused: bool = False,
    ) -> Obj | None:
        return await self.call(
            kind,
            "create",
            name,
            lambda: self.objects.create_cluster_custom_object(GROUP, VERSION, kind.plural, body),
            done=done,
            retry_refused=retry_refused,
        )

    async def delete(self, kind: CustomKind, name: str) -> None:
        await self.call(
            kind,
            "delete",
            name,
            lambda: self.objects.delete_cluster_custom_object(GROUP, VERSION, kind.plural, name),
        )
