"""Names shared by the CRD, the webhooks, the operator, the CLI and the docs.

One name for one thing: everything that appears on a Kubernetes object is spelled here once.
"""

from typing import Final

GROUP: Final = "scheduling.sluice.dev"
VERSION: Final = "v1beta1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "Queue"
PLURAL: Final = "queues"
SHORT_NAME: Final = "sq"
TOPOLOGY_KIND: Final = "Topology"
TOPOLOGY_PLURAL: Final = "topologies"
FLAVOR_KIND: Final = "Flavor"
FLAVOR_PLURAL: Final = "flavors"

ROOT_QUEUE: Final = "root"
DEFAULT_QUEUE: Final = "default"
RESERVED_QUEUES: Final = frozenset({ROOT_QUEUE, DEFAULT_QUEUE})

PREFIX: Final = "sluice.dev"

# Labels
QUEUE_LABEL: Final = f"{PREFIX}/queue-name"
"""On a batch/v1 Job: the leaf queue the job is submitted to."""
DEFAULT_QUEUE_LABEL: Final = f"{PREFIX}/default-queue"
"""On a Namespace: the queue that unlabelled Jobs of that namespace go to."""
POD_GROUP_LABEL: Final = f"{PREFIX}/pod-group"
"""On plain pods: the pods that carry the same value (in one namespace) are one workload."""

# The hold of plain pods (docs/workloads.md, "Plain pods and pod groups")
ADMISSION_GATE: Final = f"{PREFIX}/admission"
"""The scheduling gate a managed plain pod is created with; sluice removes it to admit it."""

# Annotations written by users
PREEMPTABLE_ANNOTATION: Final = f"{PREFIX}/preemptable"
"""A Job annotated "false" is never a reclaim or preempt victim; a plain pod no controller
owns is one only when annotated "true"."""
POD_GROUP_TOTAL_ANNOTATION: Final = f"{PREFIX}/pod-group-total-count"
"""On the pods of a pod group: how many pods the group has; it is admitted only whole."""
MIN_PARALLELISM_ANNOTATION: Final = f"{PREFIX}/min-parallelism"
"""On a Job, or on the pod template of a pod set that may shrink: the smallest size it may be
admitted at, counted as its kind counts its size (a Job's parallelism, a replica type's or a
worker group's replicas; docs/elastic.md, *The minimum*)."""

TOPOLOGY_REQUIRED_ANNOTATION: Final = f"{PREFIX}/topology-required"
"""On a workload or a pod template: its pods all in one domain of this Topology level."""
TOPOLOGY_PREFERRED_ANNOTATION: Final = f"{PREFIX}/topology-preferred"
"""As required, but wider levels (and, last, the whole cluster) when no domain holds them."""

# Annotations written by the operator
ADMITTED_AT_ANNOTATION: Final = f"{PREFIX}/admitted-at"
RECLAIMED_BY_ANNOTATION: Final = f"{PREFIX}/reclaimed-by"
PENDING_REASON_ANNOTATION: Final = f"{PREFIX}/pending-reason"
REQUEUES_ANNOTATION: Final = f"{PREFIX}/requeues"
"""How many times the job was suspended again because its pods were not scheduled in time."""
REQUEUED_AT_ANNOTATION: Final = f"{PREFIX}/requeued-at"
REQUEUE_REASON_ANNOTATION: Final = f"{PREFIX}/requeue-reason"
"""Which pods were not scheduled at the last requeue, and kube-scheduler's message."""
TOPOLOGY_ASSIGNMENT_ANNOTATION: Final = f"{PREFIX}/topology-assignment"
"""The domain an admitted workload was placed in (``<level>=<domain>``), which sluice added
to its pod templates' nodeSelector; taken off again when it is suspended."""
FLAVOR_ASSIGNMENT_ANNOTATION: Final = f"{PREFIX}/flavor-assignment"
"""The flavor each pod set of an admitted workload was given, and exactly what sluice added
to its pod template for it (nodeSelector labels, tolerations); taken off again when it is
suspended (docs/flavors.md)."""
ADMITTED_SIZE_ANNOTATION: Final = f"{PREFIX}/admitted-size"
RESIZABLE_LABEL: Final = f"{PREFIX}/resizable"
"""On the pod templates of a workload that declares a minimum (docs/elastic.md, *Grown
through the queue*): its pods are gated at creation and released up to its admitted size."""
"""Per pod set admitted smaller than it asked: the pods asked and admitted, and each field
sluice lowered with the value it had, put back when it is suspended (docs/elastic.md,
*Admitted smaller*)."""
CLOSED_BY_PARENT_ANNOTATION: Final = f"{PREFIX}/closed-by-parent"
"""On a Queue closed because an ancestor was closed; reopening that ancestor reopens it."""

QUEUE_FINALIZER: Final = f"{PREFIX}/subtree"
"""On Queues: deleting a parent deletes its (Closed) subtree first."""

# Scheduler configuration
CONFIGMAP_NAME: Final = "sluice-scheduler"
CONFIGMAP_KEY: Final = "scheduler.yaml"

# Condition types on Queue status
CONDITION_VALID: Final = "Valid"
CONDITION_OVER_CAPABILITY: Final = "OverCapability"
"""True while the queue's workloads hold more than its capability in a resource (their pods
ask more than they were admitted with): it admits nothing more below it that asks for that
resource."""

# Condition types on Topology status
CONDITION_NESTED: Final = "Nested"
"""True while a Topology's levels nest on the nodes; False admits nothing that requires one
of its levels (docs/scheduler.md, *Topology*)."""

# Condition types on Flavor status
CONDITION_MATCHED: Final = "Matched"
"""True while some Ready, schedulable node carries every one of a Flavor's labels."""

DEFAULT_MAX_QUEUE_DEPTH: Final = 5
