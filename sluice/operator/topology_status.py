"""The Lease holder's Topology and Flavor status writes, both read off the nodes' labels. A
Topology's (docs/scheduler.md, *Topology*): whether its levels nest on the nodes (the
condition ``Nested``, and an Event when that changes) and how many domains and nodes each
level has; decided by ``sluice.scheduler.topology_status``. A Flavor's (*Flavors*): how many
Ready, schedulable nodes carry its labels and the condition ``Matched``; decided by
``sluice.scheduler.flavor_status``.

Level-triggered, as the Queue reconciler: every Topology and Flavor is looked at when this
replica takes the Lease and after any Topology, Flavor or Node event, from the state as
watched; a burst of node
events makes one pass (at most one each ``SETTLE_SECONDS``). A status is written only when a
reader would see a difference, and the Event told only once the write is accepted (the
answer is stored at once, so the next pass does not tell it again).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from sluice.api.constants import TOPOLOGY_KIND
from sluice.operator.custom_writer import FLAVORS, TOPOLOGIES, CustomWriter, Retry
from sluice.operator.queue_reconciler import RETRY_SECONDS
from sluice.operator.state import ClusterState
from sluice.operator.writes import EventSpec
from sluice.scheduler.flavor_status import flavor_status_patch
from sluice.scheduler.topology_status import nested_event, topology_status_patch

log = logging.getLogger("sluice.operator.topologies")

SETTLE_SECONDS = 1.0
"""A pass looks at every Topology and Flavor over every node: at most one pass this often."""


class TopologyReconciler:
    def __init__(self, writer: CustomWriter, state: ClusterState) -> None:
        self.writer = writer
        self.state = state
        self.wake = asyncio.Event()

    def due(self) -> None:
        """A Topology, a Flavor or a node changed (any replica's watches call it; only the
        Lease holder acts on it)."""
        self.wake.set()

    async def run(self) -> None:
        """For as long as the process runs, from when the manager starts it (once the Lease
        is held)."""
        self.wake.set()
        while True:
            await self.wake.wait()
            self.wake.clear()
            try:
                await self.reconcile()
            except Retry as err:
                log.info("event=topology-retry reason=%s", err)
                asyncio.get_running_loop().call_later(RETRY_SECONDS, self.due)
            except Exception:  # the next event, or the retry, tries again
                log.exception("event=topology-reconcile-failed")
                asyncio.get_running_loop().call_later(RETRY_SECONDS, self.due)
            await asyncio.sleep(SETTLE_SECONDS)

    async def reconcile(self) -> None:
        topologies, nodes = self.state.topology_views()
        now = datetime.now(UTC)
        for obj, view in topologies:
            patch = topology_status_patch(obj, view, nodes, now)
            if patch is None:
                continue
            told = nested_event(obj.get("status") or {}, patch)
            if await self.writer.patch_status(TOPOLOGIES, view.name, patch) and told is not None:
                self.writer.events.post(obj, EventSpec(*told), TOPOLOGY_KIND)
                log.info("event=topology-%s topology=%s", told[0].lower(), view.name)
        await self.reconcile_flavors(now)

    async def reconcile_flavors(self, now: datetime) -> None:
        flavors, nodes = self.state.flavor_views()
        for obj, view in flavors:
            patch = flavor_status_patch(obj, view, nodes, now)
            if patch is not None:
                await self.writer.patch_status(FLAVORS, view.name, patch)
