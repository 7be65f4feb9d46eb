"""The Queue custom resource: spec and status as pydantic models.

Field names and defaults match ``crds/queues.scheduling.sluice.dev.yaml`` (a test holds the two
together). ``parent`` has no schema default because the root queue has none; every other queue
without a parent hangs under ``root`` (see ``QueueSpec.parent_name``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

from sluice.api.constants import API_VERSION, KIND, ROOT_QUEUE
from sluice.api.errors import InvalidObject
from sluice.api.quantity import QUANTITY_PATTERN, QuantityError
from sluice.api.resources import EMPTY, Resources
from sluice.api.selector import LabelSelector


def _to_resources(raw: Any) -> Resources:
    if isinstance(raw, Resources):
        return raw
    try:
        return Resources.parse(raw, "")
    except QuantityError as err:
        raise ValueError(str(err)) from None


def _to_limit(raw: Any) -> Resources:
    """A capability: a resource it names at 0 allows none, where an absent one is unlimited,
    so its zeros are kept."""
    if isinstance(raw, Resources) or not raw:
        return _to_resources(raw)
    parsed = _to_resources(raw)  # a map of quantities, or a ValueError naming what is not
    return Resources.limit({str(name): parsed.get_amount(str(name)) for name in raw})


ResourceMap = Annotated[
    Resources,
    BeforeValidator(_to_resources),
    PlainSerializer(lambda r: r.to_kube(), return_type=dict[str, str]),
    WithJsonSchema(
        {
            "type": "object",
            "additionalProperties": {"type": "string", "pattern": QUANTITY_PATTERN},
        }
    ),
]

LimitMap = Annotated[ResourceMap, BeforeValidator(_to_limit)]
"""A resource map whose named zeros count (``capability``): read by ``_to_limit`` first,
whose result the resource map's own reader keeps as it is."""

QueueSpecState = Literal["Open", "Closed"]
QueueState = Literal["Open", "Closing", "Closed", "Unknown"]
DequeueStrategy = Literal["fifo", "traverse"]


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        arbitrary_types_allowed=True,
        extra="forbid",
        frozen=True,
    )


class Guarantee(_Model):
    resource: ResourceMap = EMPTY


class FlavorQuota(_Model):
    """A queue's quota in one flavor (``spec.flavors[]``): the resources it names are counted
    per flavor, with the meaning the queue's own fields have (docs/scheduler.md, *Flavors*)."""

    name: str = Field(min_length=1, max_length=253)
    guarantee: Guarantee = Guarantee()
    deserved: ResourceMap = EMPTY
    capability: LimitMap = EMPTY

    def names(self) -> frozenset[str]:
        """The resources this entry counts in its flavor: those any of its fields names."""
        return frozenset((*self.guarantee.resource, *self.deserved, *self.capability))


WhenCanBorrow = Literal["Borrow", "TryNextFlavor"]
WhenCanReclaim = Literal["Reclaim", "TryNextFlavor"]


class FlavorFungibility(_Model):
    """Where admission stops among a queue's flavors (docs/scheduler.md, *Flavors*): at the
    first flavor a pod set would borrow in (``Borrow``), or at the first it would reclaim in
    (``Reclaim``), rather than trying the next flavor for one it fits in."""

    when_can_borrow: WhenCanBorrow = "Borrow"
    when_can_reclaim: WhenCanReclaim = "TryNextFlavor"


DEFAULT_FUNGIBILITY = FlavorFungibility()


class QueueSpec(_Model):
    weight: int = Field(default=1, ge=1, le=65535)
    capability: LimitMap = EMPTY
    deserved: ResourceMap = EMPTY
    guarantee: Guarantee = Guarantee()
    reclaimable: bool = True
    priority: int | None = Field(default=None, ge=0)
    priority_class_name: str | None = None
    parent: str | None = None
    state: QueueSpecState = "Open"
    dequeue_strategy: DequeueStrategy = "traverse"
    namespace_selector: LabelSelector | None = None
    """Namespaces whose jobs may use the queue; None (absent) or empty: every namespace."""
    flavors: tuple[FlavorQuota, ...] = ()
    """Quota per flavor, in the order admission tries them; empty: no quota by flavor."""
    flavor_fungibility: FlavorFungibility | None = None
    """Where the search among the flavors stops, read from the queue whose list is used;
    None: the defaults (``fungibility``)."""

    @model_validator(mode="after")
    def _priority_xor_class(self) -> QueueSpec:
        if self.priority is not None and self.priority_class_name:
            raise ValueError("priority and priorityClassName cannot both be set")
        return self

    def fungibility(self) -> FlavorFungibility:
        """Where the search among the flavors stops: as set, else the defaults."""
        return self.flavor_fungibility or DEFAULT_FUNGIBILITY

    def flavor(self, name: str) -> FlavorQuota | None:
        """The queue's quota in the flavor ``name``: its first entry of that name, or None."""
        return next((f for f in self.flavors if f.name == name), None)

    def parent_name(self, queue_name: str) -> str | None:
        """The effective parent: None for root, ``root`` when unset."""
        if queue_name == ROOT_QUEUE:
            return None
        return self.parent or ROOT_QUEUE


class Condition(_Model):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None


class QueueUsage(_Model):
    """What a queue used over time (docs/scheduler.md, *Usage over time*): per resource, the
    resource-seconds its admitted workloads held, decayed with the half-life to
    ``sampled_at``; the same inside a leaf per namespace; and the dominant one as text."""

    sampled_at: datetime | None = None
    resources: Mapping[str, float] = Field(default_factory=dict)
    namespaces: Mapping[str, Mapping[str, float]] = Field(default_factory=dict)
    dominant: str = ""


class FlavorStatus(_Model):
    """One flavor's figures in a Queue's status (``status.flavors[]``): what its subtree holds
    there, and its deserved and realCapability there where its own entries name it."""

    name: str
    allocated: ResourceMap = EMPTY
    deserved: ResourceMap | None = None
    real_capability: ResourceMap | None = None


class QueueStatus(_Model):
    state: QueueState | None = None
    pending: int = 0
    inqueue: int = 0
    running: int = 0
    completed: int = 0
    allocated: ResourceMap = EMPTY
    deserved: ResourceMap = EMPTY
    share: float = 0.0
    over_capability: str = ""
    """What puts it over its capability; "" while it is within it."""
    conditions: tuple[Condition, ...] = ()
    observed_generation: int | None = None
    usage: QueueUsage | None = None
    flavors: tuple[FlavorStatus, ...] = ()
    flavor_summary: str = ""
    """``h100 nvidia.com/gpu 4/8; a100 ...``: the FLAVORS printer column."""


class Queue(_Model):
    """A Queue as sluice sees it: identity, spec, status and the annotations that matter."""

    name: str
    uid: str = ""
    creation_timestamp: datetime = datetime(1970, 1, 1, tzinfo=UTC)
    generation: int = 0
    deletion_timestamp: datetime | None = None
    annotations: Mapping[str, str] = Field(default_factory=dict)
    finalizers: tuple[str, ...] = ()
    spec: QueueSpec = QueueSpec()
    status: QueueStatus = QueueStatus()

    @property
    def parent(self) -> str | None:
        return self.spec.parent_name(self.name)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Queue:
        """Read a Queue object (as the API server returns it); errors name the field."""
        meta = obj.get("metadata") or {}
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not isinstance(name, str) or not name:
            raise InvalidObject(KIND, "<unnamed>", "metadata.name", "missing")
        api_version = obj.get("apiVersion")
        if api_version is not None and api_version != API_VERSION:
            raise InvalidObject(
                KIND, name, "apiVersion", f"expected {API_VERSION}, got {api_version}"
            )
        try:
            return cls.model_validate(
                {
                    "name": name,
                    "uid": meta.get("uid") or "",
                    "creation_timestamp": meta.get("creationTimestamp")
                    or datetime(1970, 1, 1, tzinfo=UTC),
                    "generation": meta.get("generation") or 0,
                    "deletion_timestamp": meta.get("deletionTimestamp"),
                    "annotations": meta.get("annotations") or {},
                    "finalizers": tuple(meta.get("finalizers") or ()),
                    "spec": obj.get("spec") or {},
                    "status": obj.get("status") or {},
                }
            )
        except ValidationError as err:
            first = err.errors()[0]
            field = ".".join(str(part) for part in first["loc"])
            message = first["msg"].removeprefix("Value error, ")
            raise InvalidObject(KIND, name, field, message) from None

    def to_object(self) -> dict[str, Any]:
        """The Kubernetes object (spec only, as a user would apply it); ``flavors`` only when
        the queue names some, so a queue without them reads as it always has."""
        spec = self.spec.model_dump(by_alias=True, exclude_none=True, exclude_defaults=False)
        if not self.spec.flavors:
            del spec["flavors"]
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {
                "name": self.name,
                **({"annotations": dict(self.annotations)} if self.annotations else {}),
            },
            "spec": spec,
        }
