"""Volcano's scheduler-configuration names that sluice accepts without implementing, and why.

A stock ``volcano-scheduler.conf`` loads as it is: each name below is accepted with one
warning that says what is ignored and why, except Volcano's switches for what sluice always
does, which warn only when they would turn it off. A name that neither sluice nor Volcano
knows stays an error naming its key (``config.py``). docs/scheduler.md lists the same names
in its table of Volcano's keys; a test keeps the two in step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

_PLACEMENT: Final = (
    "kube-scheduler places the pods of admitted jobs; sluice only decides which jobs run"
)
_NO_MOVES: Final = "sluice never moves running pods"

IGNORED_ACTIONS: Final[Mapping[str, str]] = {
    "gangreclaim": "reclaim already takes back whole jobs (a Job is admitted and suspended as one"
    " gang)",
    "gangpreempt": "preempt already suspends whole jobs (a Job is admitted and suspended as one"
    " gang)",
    "shuffle": _NO_MOVES,
}

IGNORED_PLUGINS: Final[Mapping[str, str]] = {
    "conformance": "sluice only ever suspends the Jobs it manages, and it manages none in"
    " kube-system",
    "overcommit": "admission counts the cluster's allocatable exactly; sluice does not"
    " overcommit it",
    "predicates": _PLACEMENT,
    "nodeorder": _PLACEMENT,
    "binpack": _PLACEMENT,
    "numa-aware": _PLACEMENT,
    "task-topology": _PLACEMENT,
    "network-topology-aware": _PLACEMENT,
    "nodegroup": _PLACEMENT,
    "deviceshare": _PLACEMENT,
    "resource-strategy-fit": _PLACEMENT,
    "tdm": _PLACEMENT,
    "extender": "sluice calls no scheduler extender",
    "sla": "sluice has no waiting-time targets; job and queue priority order the jobs",
    "cdp": "reclaim's minRuntime protects recently admitted jobs instead",
    "rescheduling": _NO_MOVES,
    "pdb": "sluice suspends whole Jobs and does not consult PodDisruptionBudgets",
    "resourcequota": "Kubernetes' ResourceQuota admission still limits the pods of admitted Jobs",
}

PLUGIN_SWITCHES: Final = frozenset(
    {
        "enableJobOrder",
        "enableJobReady",
        "enableJobPipelined",
        "enableTaskOrder",
        "enablePreemptable",
        "enableReclaimable",
        "enablePreemptive",
        "enableQueueOrder",
        "enabledClusterOrder",
        "enablePredicate",
        "enableBestNode",
        "enableNodeOrder",
        "enableTargetJob",
        "enableReservedNodes",
        "enableJobEnqueued",
        "enabledVictim",
        "enableJobStarving",
        "enabledOverused",
        "enabledAllocatable",
        "enabledHyperNodeOrder",
        "enabledSubJobReady",
        "enabledSubJobPipelined",
        "enabledSubJobOrder",
        "enabledHyperNodeGradient",
    }
)
"""Volcano's per-plugin switches (``enablePreemptable: false``...), other than enableHierarchy."""

SWITCH_REASON: Final = (
    "sluice does not switch a plugin's parts on and off; each plugin does what"
    " docs/scheduler.md says"
)

HIERARCHY_OFF_REASON: Final = (
    "sluice always schedules the queue tree that spec.parent draws (queues that all sit under"
    " root are a tree of depth one)"
)

_CONSUMED_CAPACITY: Final = (
    "sluice counts each device a claim asks or holds as one unit of its class's quota"
    " resource, not the capacity a claim consumes within a device"
)

_NODE_USAGE: Final = (
    "Volcano's usage plugin places pods by the nodes' load; sluice's usage plugin orders"
    " queues by what they used over time (docs/scheduler.md, *Usage over time*)"
)

IGNORED_PLUGIN_ARGUMENTS: Final[Mapping[str, Mapping[str, str]]] = {
    "usage": {
        "usage.weight": _NODE_USAGE,
        "cpu.weight": _NODE_USAGE,
        "memory.weight": _NODE_USAGE,
        "thresholds": _NODE_USAGE,
    },
    "capacity": {
        "ancestorReclaimLevel": "sluice checks every level between a victim's queue and the"
        " reclaimer's common ancestor, and the reclaimer's own levels below it",
        "capacity.DRAConsumableCapacityEnable": _CONSUMED_CAPACITY,
    },
}

ALWAYS_ON_PLUGIN_ARGUMENTS: Final[Mapping[str, Mapping[str, str]]] = {
    "capacity": {
        "capacity.DynamicResourceAllocationEnable": "sluice always counts the devices pods ask"
        " through DRA claims in their queues, so that no claim escapes a queue's capability"
        " (docs/scheduler.md, *Devices (DRA)*)",
    },
}
"""Volcano's plugin switches for what sluice always does, by plugin: ``true`` is what sluice
does and is accepted silently; ``false`` is accepted with a warning that says why the
behaviour stays on. Volcano reads each under the same plugin and key."""

_ERROR_CACHE: Final = {"predicateErrorCacheEnable": _PLACEMENT}

IGNORED_ACTION_ARGUMENTS: Final[Mapping[str, Mapping[str, str]]] = {
    "allocate": _ERROR_CACHE,
    "backfill": _ERROR_CACHE,
    "reclaim": _ERROR_CACHE,
    "preempt": {
        **_ERROR_CACHE,
        **{
            key: "sluice preempts whole jobs inside a queue and picks no nodes"
            for key in (
                "enableTopologyAwarePreemption",
                "topologyAwarePreemptWorkerNum",
                "minCandidateNodesPercentage",
                "minCandidateNodesAbsolute",
                "maxCandidateNodesAbsolute",
            )
        },
    },
}

IGNORED_TOP_LEVEL: Final[Mapping[str, str]] = {
    "metrics": "the operator serves its own Prometheus metrics (--metrics-port)",
}
