"""The records a Session keeps of each job and each queue during a cycle (sluice/scheduler/
session.py): plain data the actions read and change, and the decision pass keeps from one
session to the next (sluice/scheduler/kept.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from sluice.api.queue import DEFAULT_FUNGIBILITY, FlavorFungibility, Queue
from sluice.api.resources import EMPTY, Resources
from sluice.api.views import PodView, PriorityClassView, WorkloadView
from sluice.scheduler.placement import Footprint
from sluice.scheduler.usage import Amounts

NOWHERE: Mapping[str, Mapping[str, int]] = MappingProxyType({})
"""What a workload that holds in no flavor holds per flavor: shared, never written."""
Bound = tuple[str, int, int, str]
"""What a queue's entry in a flavor holds admission to in one resource: (resource, deserved,
limit, the limit's name in a pending reason: capability, realCapability or deserved)."""


def _nowhere() -> Mapping[str, Mapping[str, int]]:
    return NOWHERE


@dataclass(slots=True, eq=False)
class JobInfo:
    view: WorkloadView
    priority: int
    request: Mapping[str, int]
    admitted: bool
    admitted_at: datetime | None
    finished: bool
    fresh: bool = False  # admitted by this cycle: never a victim in the same cycle
    evicted: bool = False  # a victim of this cycle: not admitted again before the next
    never_preempts: bool = False  # preemptionPolicy Never: it never reclaims nor preempts
    key: str = ""  # namespace/name, copied from the view: read on every hot path
    queue: str = ""
    held: Mapping[str, int] = field(default_factory=dict)
    """What it takes of the cluster and of its queues while admitted: its request, or its
    own pods' requests where they add up to more (per pod set; they replace the
    reservation, never add to it)."""
    footprint: Footprint = field(default_factory=dict)
    """Node -> what it holds there: its bound pods, and room kept for its pods not bound yet."""
    pods: list[PodView] = field(default_factory=list)  # its own pods, when it is admitted
    flavors: tuple[tuple[str, str], ...] = ()
    """(pod set, flavor) for each pod set, while admitted into flavors; () when it is not."""
    held_in: Mapping[str, Mapping[str, int]] = field(default_factory=_nowhere)
    """Flavor -> resource -> what it holds there while admitted (``flavor_quota.counted``)."""
    parts: tuple[JobInfo, ...] | None = None
    """Its victims above its minimum, newest first (actions/growth_victims.py), once asked;
    None until then."""
    part_of: JobInfo | None = None
    """For such a victim: the workload whose pods it stands for; None for a workload."""
    part: tuple[str, int, int] = ("", 0, 0)
    """For such a victim: its pod set, its pods and its rank (the newest highest); for a
    remainder (``rest_of``) or a workload, rank 0: taken after its parts."""
    rest_of: JobInfo | None = None
    """A workload less its parts already chosen as victims, standing for it in a choice of
    victims (``growth_victims.remainder``); None otherwise."""


@dataclass(slots=True, eq=False)
class QueueInfo:
    name: str
    queue: Queue
    parent: str | None
    children: tuple[str, ...]
    depth: int
    priority: int
    weight: int
    guarantee: Resources
    capability: Resources  # absent resource: unlimited
    real_capability: Resources = EMPTY  # absent resource: 0
    deserved: Resources = EMPTY
    request: Resources = EMPTY  # allocated + pending of the subtree, for proportion
    invalid_reason: str = ""  # its own rule break
    blocked_by: str = ""  # an invalid ancestor-or-self: nothing is admitted here
    allocated: dict[str, int] = field(default_factory=dict)
    pending_jobs: list[JobInfo] = field(default_factory=list)
    refused_jobs: list[JobInfo] = field(default_factory=list)
    """Waiting jobs not considered this cycle: from namespaces the queue's namespaceSelector
    does not take, or backing off after a requeue."""
    admitted_jobs: list[JobInfo] = field(default_factory=list)
    completed: int = 0
    chain: list[str] | None = None
    """The queue and its ancestors, nearest first (``Session.chain``): set when first asked,
    and kept with the record, whose parent never changes."""
    passed_on: int | None = None  # the priority its jobs inherit, when it sets one
    over_capability: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Resource -> (allocated, capability) where what its workloads hold exceeds its
    capability (their pods ask more than they were admitted with): nothing more that asks for
    one of these resources is admitted below it until it fits again
    (``fit.over_capability_failure``)."""
    grown: list[tuple[str, Resources]] = field(default_factory=list)
    """The workloads below it whose pods hold more than they were admitted with, in a
    resource it is over in, and how much more: what its condition names."""
    flavor_list: tuple[str, ...] = ()
    """The flavors its workloads may be given, in the order tried (``flavors.flavor_list``);
    (): none, its workloads are admitted as in a cluster without flavors."""
    flavor_allocated: dict[str, dict[str, int]] = field(default_factory=dict)
    """Flavor -> what the admitted workloads of its subtree hold in it (``allocated`` per
    flavor)."""
    flavor_real_capability: dict[str, Resources] = field(default_factory=dict)
    """Its realCapability in each flavor its entries name (absent resource: 0)."""
    flavor_deserved: dict[str, Resources] = field(default_factory=dict)
    """Its deserved in each flavor its entries name."""
    flavor_over_capability: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    """Flavor -> resource -> (allocated, capability) where what its subtree holds in the
    flavor exceeds its entry's capability there: nothing more that asks for one of these
    resources is admitted below it into that flavor until it fits again
    (``over_capability`` per flavor)."""
    flavor_bounds: dict[str, tuple[Bound, ...]] = field(default_factory=dict)
    """Flavor -> what admission holds it to there, for each flavor its entries name: per
    resource its entry names, in name order, (resource, deserved, limit, the limit's name)
    (``count_flavors``). Worked out once a session, since a cycle asks it for every flavor
    tried for every job."""
    flavor_levels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Flavor of its list -> the queues of its chain whose entries name it, root first."""
    fungibility: FlavorFungibility = DEFAULT_FUNGIBILITY
    """Where the search among its flavors stops: as the queue whose list it uses says."""

    def clear(self) -> None:
        """Back to how it is built (``Session._build_queues``): no jobs, nothing derived."""
        self.real_capability = self.deserved = self.request = EMPTY
        self.allocated = {}
        self.pending_jobs = []
        self.refused_jobs = []
        self.admitted_jobs = []
        self.completed = 0
        self.over_capability = {}
        self.grown = []
        self.flavor_list = ()
        self.flavor_allocated = {}
        self.flavor_over_capability = {}
        self.flavor_real_capability = {}
        self.flavor_deserved = {}
        self.flavor_bounds = {}
        self.flavor_levels = {}
        self.fungibility = DEFAULT_FUNGIBILITY


@dataclass(frozen=True, slots=True)
class Priorities:
    """The PriorityClasses as a cycle reads them."""

    values: Mapping[str, int]
    """Class name -> its value."""
    default: int
    """The value of the global default class; 0 without one."""
    never: frozenset[str]
    """The classes whose pods never take room from others (``preemptionPolicy: Never``)."""
    default_never: bool
    """Whether the global default class is such a class."""

    @classmethod
    def of(cls, classes: Sequence[PriorityClassView]) -> Priorities:
        defaults = [pc for pc in classes if pc.global_default]
        top = max(defaults, key=lambda pc: (pc.value, pc.name), default=None)
        return cls(
            values={pc.name: pc.value for pc in classes},
            default=max((pc.value for pc in defaults), default=0),
            never=frozenset(pc.name for pc in classes if pc.never_preempts),
            default_never=top is not None and top.never_preempts,
        )


@dataclass(slots=True)
class Usage:
    """Each queue's usage at the cycle's time (the usage plugin), entry penalties included."""

    queues: dict[str, Amounts] = field(default_factory=dict)
    """Queue -> its usage."""
    namespaces: dict[str, dict[str, Amounts]] = field(default_factory=dict)
    """Leaf -> namespace -> the namespace's usage in that leaf."""
