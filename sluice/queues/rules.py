"""The rules a queue tree keeps (README, "Queues"), each a function over a QueueTree that
returns the breaches it finds, and one way to say a breach.

Two users, one catalogue. The webhooks refuse a request that breaks a rule or breaks it further
(admission.py compares the tree before and after: a breach already there, kept or shrunk, is
not the request's fault). The operator marks every queue that breaks one Valid=False with the
message of its first breach (``tree_violations``).

Quantities follow one convention: a map that is not set (empty) does not constrain; a map
that is set counts an absent resource as 0, except ``capability``, where an absent resource
is unlimited. Root is unlimited here: what its children are guaranteed beyond the cluster is
only warned about (warnings.py). Quotas per flavor keep the same rules, one flavor at a time
(flavors.py), and the queue's own fields bound the sum over its flavors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace

from sluice.api.constants import ROOT_QUEUE
from sluice.api.queue import Queue
from sluice.api.resources import describe_amount
from sluice.queues.flavors import flavor_tree, flavors_named, named_twice, quota_as_queue
from sluice.queues.limits import guarantees_of_children, real_capabilities
from sluice.queues.tree import QueueTree
from sluice.queues.verdict import Verdict, deny


@dataclass(frozen=True, slots=True)
class Breach:
    """One rule broken once: by which queue, in which resource, by how much."""

    rule: str
    """The stable id a refusal carries (``max-depth``, ``guarantee-sum``, ...)."""
    queue: str
    """The queue that breaks it, the one to fix: the operator marks this one invalid."""
    resource: str = ""
    amount: int = 0
    """What the queue has: its depth, a quantity, its children's sum."""
    limit: int = 0
    """What the rule allows it."""
    what: str = ""
    """The name of ``amount``: a field of the queue (``guarantee``, ``capability``)."""
    against: str = ""
    """The name of ``limit``: a field, or which of the parent's numbers bounds a sum."""
    ancestor: str = ""
    """The ancestor whose capability is the limit (capability rule only)."""
    flavor: str = ""
    """The flavor whose quotas break it; "" for the queue's own fields."""

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """The relation broken: the same breach in two trees has the same key."""
        return (self.rule, self.queue, self.ancestor, self.resource, self.flavor)

    @property
    def excess(self) -> int:
        return self.amount - self.limit

    def message(self, subject: str | None = None) -> str:
        """The breach as said to ``subject`` (the queue a request changes; by default the
        queue that breaks it)."""
        return self.refusal(subject).message

    def refusal(self, subject: str | None = None) -> Verdict:
        seen_from = self.queue if subject is None else subject
        rule, text = _SAY[self.rule](self, seen_from)
        if self.flavor and self.rule not in _NAMES_ITS_FLAVOR:
            text = f"in flavor {self.flavor}, {text}"
        return deny(rule, f"queue {seen_from}: {text}")


def _amount(breach: Breach, value: int) -> str:
    return describe_amount(breach.resource, value)


def _say_depth(b: Breach, subject: str) -> tuple[str, str]:
    return b.rule, (
        f"the tree would be {b.amount} levels deep under root"
        f" (maximum {b.limit}, set by --max-queue-depth)"
    )


def _say_negative(b: Breach, subject: str) -> tuple[str, str]:
    return b.rule, f"{b.what} {_amount(b, b.amount)} is negative; quantities must be >= 0"


def _say_over_own(b: Breach, subject: str) -> tuple[str, str]:
    return b.rule, (
        f"{b.what} {_amount(b, b.amount)} exceeds its {b.against} {_amount(b, b.limit)};"
        f" {b.what} must be <= {b.against}"
    )


def _say_capability(b: Breach, subject: str) -> tuple[str, str]:
    amount, limit = _amount(b, b.amount), _amount(b, b.limit)
    if subject == b.queue:
        return b.rule, (
            f"capability {amount} exceeds the capability {limit} of its ancestor {b.ancestor}"
        )
    if subject == b.ancestor:
        return "capability-under-descendant", (
            f"capability {limit} is below the capability {amount} of its descendant {b.queue}"
        )
    return b.rule, (
        f"its descendant {b.queue} has capability {amount}, more than the capability {limit}"
        f" of {b.ancestor}"
    )


def _say_sum(b: Breach, subject: str) -> tuple[str, str]:
    parent, limit = b.queue, _amount(b, b.limit)
    below = (
        f"the queues nearest below {parent} that name it"
        if b.flavor
        else f"the children of {parent}"
    )
    if b.against in ("guarantee", "deserved"):
        shown = f"{parent}'s {b.against} {limit}"
    else:
        shown = f"all {parent} can ever hold, its {b.against} {limit}"
        if b.against == "realCapability":
            shown += " (the capabilities above it less the guarantees beside it)"
    return b.rule, f"{below} would have {b.what} {_amount(b, b.amount)} in total, more than {shown}"


def _say_twice(b: Breach, subject: str) -> tuple[str, str]:
    return b.rule, f"flavor {b.flavor} is listed twice in spec.flavors; list each flavor once"


def _say_over_own_fields(b: Breach, subject: str) -> tuple[str, str]:
    return b.rule, (
        f"the {b.what} of its flavors ({b.flavor}) add up to {_amount(b, b.amount)}, more than"
        f" its own {b.against} {_amount(b, b.limit)}, which bounds the sum over its flavors"
    )


_SAY: Mapping[str, Callable[[Breach, str], tuple[str, str]]] = {
    "max-depth": _say_depth,
    "negative-quantity": _say_negative,
    "guarantee-over-deserved": _say_over_own,
    "deserved-over-capability": _say_over_own,
    "guarantee-over-capability": _say_over_own,
    "capability-over-ancestor": _say_capability,
    "guarantee-sum": _say_sum,
    "deserved-sum": _say_sum,
    "flavor-listed-twice": _say_twice,
    "flavors-over-own": _say_over_own_fields,
}

_NAMES_ITS_FLAVOR = frozenset({"flavor-listed-twice", "flavors-over-own"})


# The rules --------------------------------------------------------------------------------


def depth(tree: QueueTree, max_queue_depth: int) -> Iterator[Breach]:
    """No queue deeper under root than ``max_queue_depth`` (root 0, its children 1); the
    deepest first."""
    for name in sorted(tree.queues, key=lambda n: (-tree.depth(n), n)):
        if (levels := tree.depth(name)) <= max_queue_depth:
            return
        yield Breach("max-depth", name, amount=levels, limit=max_queue_depth)


def amounts(queue: Queue) -> Iterator[Breach]:
    """A queue's own quantities: none negative; guarantee <= deserved <= capability."""
    spec = queue.spec
    fields = {
        "capability": spec.capability,
        "deserved": spec.deserved,
        "guarantee.resource": spec.guarantee.resource,
    }
    for field_name, values in fields.items():
        for resource in sorted(values):
            if values[resource] < 0:
                yield Breach(
                    "negative-quantity", queue.name, resource, values[resource], 0, field_name
                )
    guarantee = spec.guarantee.resource
    for lower_name, lower, upper_name, upper in (
        ("guarantee", guarantee, "deserved", spec.deserved),
        ("deserved", spec.deserved, "capability", spec.capability),
        ("guarantee", guarantee, "capability", spec.capability),
    ):
        for resource in sorted(lower):
            if resource in upper and lower[resource] > upper[resource]:
                yield Breach(
                    f"{lower_name}-over-{upper_name}",
                    queue.name,
                    resource,
                    lower[resource],
                    upper[resource],
                    lower_name,
                    upper_name,
                )


def capability(tree: QueueTree) -> Iterator[Breach]:
    """Each resource a queue caps is within the cap of its nearest ancestor capping it."""
    for name in sorted(tree.queues):
        for resource, amount in sorted(tree.queues[name].spec.capability.items()):
            nearest = nearest_cap(tree, name, resource)
            if nearest is not None and amount > nearest[1]:
                yield Breach(
                    "capability-over-ancestor",
                    name,
                    resource,
                    amount,
                    nearest[1],
                    "capability",
                    "capability",
                    nearest[0],
                )


def nearest_cap(tree: QueueTree, name: str, resource: str) -> tuple[str, int] | None:
    """The nearest ancestor of ``name`` that caps ``resource``, and its cap."""
    for ancestor in tree.ancestors(name):
        queue = tree.queues.get(ancestor)
        if queue is not None and resource in queue.spec.capability:
            return ancestor, queue.spec.capability[resource]
    return None


def sums(tree: QueueTree) -> Iterator[Breach]:
    """Children's guarantees and deserved within what their parent allows, per resource.

    Guarantees must fit in the parent's guarantee where it names the resource, else in what
    the parent can ever hold (its realCapability, root unlimited): a guarantee beyond that can
    never be honoured. Deserved must fit in the parent's deserved when it sets one (absent 0).
    """
    limits = real_capabilities(tree, [ROOT_QUEUE])
    for parent in sorted(tree.queues):
        children = tree.children(parent)
        if parent == ROOT_QUEUE or not children:
            continue
        spec = tree.queues[parent].spec
        real = limits.get(parent, {})
        for resource, total in sorted(guarantees_of_children(tree, parent).items()):
            if resource in spec.guarantee.resource:
                bound, against = spec.guarantee.resource[resource], "guarantee"
            elif resource in real:
                bound = real[resource]
                capped = spec.capability.get(resource) == bound
                against = "capability" if capped else "realCapability"
            else:
                continue  # nothing limits the parent in it
            if total > bound:
                yield Breach("guarantee-sum", parent, resource, total, bound, "guarantee", against)
        if not spec.deserved:
            continue
        wanted: dict[str, int] = {}
        for child in children:
            for resource, amount in tree.queues[child].spec.deserved.items():
                wanted[resource] = wanted.get(resource, 0) + amount
        for resource, total in sorted(wanted.items()):
            bound = spec.deserved.get_amount(resource)
            if total > bound:
                yield Breach("deserved-sum", parent, resource, total, bound, "deserved", "deserved")


def listed_twice(queue: Queue) -> Iterator[Breach]:
    """Each flavor a queue lists once at most."""
    for flavor in named_twice(queue):
        yield Breach("flavor-listed-twice", queue.name, flavor=flavor)


def flavors_within_own(queue: Queue) -> Iterator[Breach]:
    """The queue's own fields bound the sum over its flavors, per resource they name: the
    flavors' guarantees within its guarantee and its capability, their deserved within its
    deserved."""
    spec = queue.spec
    for what, against, bound in (
        ("guarantee", "guarantee", spec.guarantee.resource),
        ("deserved", "deserved", spec.deserved),
        ("guarantee", "capability", spec.capability),
    ):
        parts: dict[str, list[tuple[str, int]]] = {}
        for entry in spec.flavors:
            amounts_of = entry.guarantee.resource if what == "guarantee" else entry.deserved
            for resource, amount in amounts_of.items():
                if resource in bound:
                    parts.setdefault(resource, []).append((entry.name, amount))
        for resource, named in sorted(parts.items()):
            total = sum(amount for _, amount in named)
            if total > bound[resource]:
                shown = ", ".join(f"{f} {describe_amount(resource, a)}" for f, a in named)
                yield Breach(
                    "flavors-over-own",
                    queue.name,
                    resource,
                    total,
                    bound[resource],
                    what,
                    against,
                    flavor=shown,
                )


def own(queue: Queue) -> Iterator[Breach]:
    """Every rule a queue keeps on its own: its amounts, each flavor listed once, each
    flavor's amounts, and its own fields bounding the sum over its flavors."""
    yield from amounts(queue)
    if not queue.spec.flavors:
        return
    yield from listed_twice(queue)
    for flavor in dict.fromkeys(entry.name for entry in queue.spec.flavors):
        quota = quota_as_queue(queue.name, queue.parent, queue, flavor)
        yield from (replace(b, flavor=flavor) for b in amounts(quota))
    yield from flavors_within_own(queue)


def per_flavor(tree: QueueTree) -> Iterator[Breach]:
    """The rules between queues, capabilities and children's sums, in each flavor over the
    quotas in it (flavors.py), flavor by flavor."""
    for flavor in flavors_named(tree):
        projected = flavor_tree(tree, flavor)
        found = list(capability(projected))
        found.extend(sums(projected))
        yield from (replace(b, flavor=flavor) for b in found)


def breaches(tree: QueueTree, max_queue_depth: int) -> list[Breach]:
    """Every breach of the tree, rule by rule in the catalogue's order, then per flavor."""
    out = list(depth(tree, max_queue_depth))
    for name in sorted(tree.queues):
        out.extend(own(tree.queues[name]))
    out.extend(capability(tree))
    out.extend(sums(tree))
    out.extend(per_flavor(tree))
    return out


def tree_violations(tree: QueueTree, max_queue_depth: int) -> dict[str, str]:
    """Queue -> why it breaks the rules, for a tree that got past the webhooks anyway.

    The offending queue is the one to fix: the queue with a broken parent link, the queue too
    deep, the queue whose own amounts or capability are wrong, and the parent whose children's
    guarantees or deserved add up to more than its own. A queue breaking several rules is
    marked with the first, in the catalogue's order.
    """
    out: dict[str, str] = dict(tree.problems())
    for breach in breaches(tree, max_queue_depth):
        out.setdefault(breach.queue, breach.message())
    return dict(sorted(out.items()))
