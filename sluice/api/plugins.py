"""The scheduler's plugins, described once: what each one does to a cycle.

Configuration (config.py) reads which names exist and which arguments each takes; the
scheduler reads which plugin splits deserved and what each one orders queues by
(docs/scheduler.md). A plugin's own numbers are the scheduler's: the deserved splits in
``sluice/scheduler/plugins/deserved.py``, the queue keys in ``sluice/scheduler/order.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

QueueOrder = Literal["priority", "drf", "share", "usage"]
"""What a plugin compares sibling queues by: priority (higher first), dominant share of the
cluster per unit of weight (lower first), share of deserved (lower first), decayed dominant
usage per unit of weight (lower first; ``sluice/scheduler/usage.py``)."""


@dataclass(frozen=True, slots=True)
class Plugin:
    name: str
    deserved: bool = False
    """It computes deserved; the first such plugin in tier order does (docs/scheduler.md)."""
    queue_order: QueueOrder | None = None
    """Its opinion in queue order and its part of the queue score (QueueScoreOrderEnable)."""
    arguments: tuple[str, ...] = ()
    elastic_switch: bool = False
    """Its ElasticEnable false makes each queue's deserved a limit, like its capability."""


PLUGINS: Final[Mapping[str, Plugin]] = {
    p.name: p
    for p in (
        Plugin("priority", queue_order="priority"),
        Plugin("gang"),  # a Job is always one gang: accepted, it changes nothing
        Plugin("drf", queue_order="drf"),
        Plugin("proportion", deserved=True, queue_order="share"),
        Plugin("capacity", deserved=True, queue_order="share"),
        Plugin(
            "proportion_optimize",
            deserved=True,
            queue_order="share",
            arguments=("GuaranteeEnable", "ElasticEnable", "PriorityType"),
            elastic_switch=True,
        ),
        Plugin(
            "usage",
            queue_order="usage",
            arguments=("halfLife", "resourceWeights", "entryPenalty"),
        ),
    )
}
