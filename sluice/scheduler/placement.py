"""Placement: which nodes may take a pod, how much room each has, and whether every pod of a
job fits at once. The one rule admission, reclaim, preempt and the pending reasons all use.

A node's free room is its allocatable minus the requests of every unfinished pod bound to it,
whoever owns it, minus what admitted jobs hold there for pods not bound yet. Nodes that are not
Ready or are cordoned hold no room; a node whose NoSchedule/NoExecute taint a pod does not
tolerate, or whose labels its nodeSelector or required node affinity reject, holds none for
that pod. Pods are placed first fit over the nodes in name order (a job's pods are all alike;
admitted jobs' waiting pods are placed largest first): a check that they can run, not a
prediction of where kube-scheduler will put them.

Room only shrinks while jobs are admitted, and grows only where a victim's room is given back,
so two things are remembered per pod shape: the first node that could still take one pod
(nodes before it never can again, but for those given room back since), and, until room
grows, the smallest count that did not fit. Whether a node could hold one were it empty
depends on its allocatable alone: asked once per node and shape.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence

from sluice.api.constraints import (
    BLOCKING_EFFECTS,
    NodeRequirement,
    NodeTerm,
    PodSpecView,
    tolerates,
)
from sluice.api.resources import describe_amount
from sluice.api.views import NodeView

Room = dict[str, int]
Footprint = dict[int, Room]
"""Node index -> what a job holds on it."""
Assignment = list[tuple[int, int]]
"""(node index, pods) for the pods of one job."""


def requirement_holds(req: NodeRequirement, node: NodeView) -> bool:
    if req.on_field:  # matchFields: Kubernetes supports metadata.name only
        value: str | None = node.name if req.key == "metadata.name" else None
    else:
        value = node.labels.get(req.key)
    return holds_for(req, value)


def holds_for(req: NodeRequirement, value: str | None) -> bool:
    """Whether the requirement holds where its key has ``value`` (None: the key is absent)."""
    op = req.operator
    if op == "In":
        return value in req.values
    if op == "NotIn":
        return value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    try:  # Gt, Lt: the label must be an integer
        have, limit = int(value or ""), int(req.values[0])
    except ValueError:
        return False
    return have > limit if op == "Gt" else have < limit


def terms_hold(terms: Sequence[NodeTerm], node: NodeView) -> bool:
    """Whether a node selector's terms take the node: one of them holds, every requirement
    of it; an empty term takes no node, as in Kubernetes."""
    return any(term and all(requirement_holds(r, node) for r in term) for term in terms)


def refusal(pod: PodSpecView, node: NodeView) -> str | None:
    """Why the node may not take the pod, or None. Room is not looked at."""
    if not node.ready:
        return "not Ready"
    if not node.schedulable:
        return "cordoned"
    if any(node.labels.get(k) != v for k, v in pod.node_selector):
        return "not matching its nodeSelector"
    if pod.affinity is not None and not terms_hold(pod.affinity, node):
        return "not matching its node affinity"
    for taint in node.taints:
        if taint.effect in BLOCKING_EFFECTS and not any(
            tolerates(t, taint) for t in pod.tolerations
        ):
            return f"with taint {taint.describe()} it does not tolerate"
    return None


def fits_in(
    free: Mapping[str, int],
    items: Sequence[tuple[str, int]],
    most: int,
    extra: Mapping[str, int] | None = None,
) -> int:
    """How many pods of ``items`` (their positive requests) fit in ``free`` (with ``extra``
    added), at most ``most``."""
    n = most
    for r, a in items:
        have = free.get(r, 0) if extra is None else free.get(r, 0) + extra.get(r, 0)
        if have < a:
            return 0
        if have // a < n:
            n = have // a
    return n


def add_room(target: Room, amounts: Mapping[str, int], sign: int = 1) -> None:
    """Add ``amounts`` (times ``sign``) to ``target``, resource by resource."""
    for r, a in amounts.items():
        target[r] = target.get(r, 0) + sign * a


def _first(assignment: Assignment, count: int) -> Assignment:
    """The first ``count`` pods of a first-fit assignment: where first fit puts that many."""
    out: Assignment = []
    for i, n in assignment:
        out.append((i, min(n, count)))
        count -= n
        if count <= 0:
            break
    return out


class _Shape:
    """What placement remembers of one pod shape (request and constraints) during a cycle.

    Nodes at or after ``cursor`` may take one such pod; before it only those in ``early``
    may, and those given room back since (``Placement.grown``, read up to ``read``). Room only
    shrinks otherwise, so a node looked at that took no pod never will until then.
    """

    __slots__ = (
        "cursor", "early", "eligible", "every", "failed", "failed_read", "fitted", "holds",
        "items", "position", "read",
    )  # fmt: skip

    def __init__(
        self, items: list[tuple[str, int]], eligible: list[int], position: dict[int, int], read: int
    ) -> None:
        self.items = items
        self.eligible = eligible
        self.position = position  # node index -> its position in eligible
        self.cursor = 0
        self.early: list[int] = []
        self.read = read
        self.failed = 0
        """The smallest count found not to fit since room last grew on a node it may go on
        (``Placement.grown``, read up to ``failed_read`` for it); 0: none."""
        self.failed_read = read
        self.fitted: tuple[int, int, Assignment] | None = None
        """The last placement of all its pods: room's version then, how many, where."""
        self.every: set[str] | None = None  # what every node that could hold one lacked
        self.holds: dict[int, bool] = {}  # node -> whether it could hold one, empty


class Placement:
    """The nodes' free room during one cycle, changed as jobs are admitted and evicted."""

    def __init__(self, nodes: Iterable[NodeView], like: Placement | None = None) -> None:
        """``like``: a placement of these very nodes (in any state): what follows from the
        nodes alone (their order and index, the total, which nodes may take each set of
        constraints) is taken from it instead of being worked out again."""
        if like is None:
            self.nodes = sorted(nodes, key=lambda n: n.name)
            self.index = {node.name: i for i, node in enumerate(self.nodes)}
            self.total: Room = {}
            """The room of the nodes that hold any (Ready, not cordoned): the cluster's total."""
            for node in self.nodes:
                if node.usable:
                    add_room(self.total, node.allocatable)
            self.usable = {n.name: i for i, n in enumerate(self.nodes) if n.usable}
            """Node name -> index, for the nodes that hold room."""
            self._empty: list[Room] = [dict(node.allocatable.items()) for node in self.nodes]
            """Each node's room with nothing on it: never changed (``free`` shares its rooms
            until one is written, ``room``)."""
            self._eligible: dict[tuple[object, ...], tuple[list[int], dict[int, int]]] = {}
            """Constraints -> the nodes that may take such pods, in order, and their positions."""
        else:
            self.nodes, self.index, self.total = like.nodes, like.index, like.total
            self.usable, self._empty, self._eligible = like.usable, like._empty, like._eligible
        self.free: list[Room] = list(self._empty)
        self._written: set[int] = set()  # the nodes whose room in ``free`` is this one's own
        self.grown: list[int] = []  # every node room was given back on, in order
        self.watchers: list[Callable[[Footprint, int], None]] = []
        """Told of every room held (-1) or given back (+1): what keeps sums of it (topology)."""
        self.version = 0  # changed whenever room is held or given back
        self._shapes: dict[PodSpecView, _Shape] = {}
        self._most: dict[tuple[object, ...], dict[str, tuple[int, int]]] = {}
        self._explained: dict[tuple[PodSpecView, int], str] = {}

    # Room --------------------------------------------------------------------------------
    def start_from(self, free: list[Room]) -> None:
        """Take this free room of each node (before anything is held): shared with whoever
        else has it until this placement writes to a node's (``room``)."""
        self.free = list(free)
        self._written = set()

    def room(self, i: int) -> Room:
        """Node ``i``'s free room, to be changed: this placement's own copy."""
        if i in self._written:
            return self.free[i]
        self._written.add(i)
        room = self.free[i] = dict(self.free[i])
        return room

    def hold(self, footprint: Footprint) -> None:
        self.version += 1
        for watcher in self.watchers:
            watcher(footprint, -1)
        for i, room in footprint.items():
            add_room(self.room(i), room, -1)
        self._most.clear()
        self._explained.clear()

    def release(self, footprint: Footprint) -> None:
        self.version += 1
        for watcher in self.watchers:
            watcher(footprint, 1)
        for i, room in footprint.items():
            add_room(self.room(i), room)
            self.grown.append(i)
        self._most.clear()
        self._explained.clear()

    @staticmethod
    def footprint(pod: PodSpecView, assignment: Assignment) -> Footprint:
        return {i: {r: a * n for r, a in pod.request.items()} for i, n in assignment}

    # Which nodes ---------------------------------------------------------------------------
    def _shape(self, pod: PodSpecView) -> _Shape:
        shape = self._shapes.get(pod)
        if shape is None:
            known = self._eligible.get(pod.constraints)
            if known is None:
                order = [i for i, node in enumerate(self.nodes) if refusal(pod, node) is None]
                known = self._eligible[pod.constraints] = (
                    order,
                    {i: p for p, i in enumerate(order)},
                )
            items = [(r, a) for r, a in pod.request.items() if a > 0]
            shape = self._shapes[pod] = _Shape(items, *known, len(self.grown))
        return shape

    def seed(self, pod: PodSpecView, nodes: list[int]) -> None:
        """The nodes (in order) that may take pods of these constraints, when the caller knows
        them already (a topology domain's nodes among another shape's): not looked up again."""
        if pod.constraints not in self._eligible:
            self._eligible[pod.constraints] = (nodes, {i: p for p, i in enumerate(nodes)})

    def eligible(self, pod: PodSpecView) -> list[int]:
        """The nodes that may take the pod, in placement order."""
        return self._shape(pod).eligible

    def could_hold(self, pod: PodSpecView, i: int) -> bool:
        """Whether node ``i`` may take the pod and could hold one, empty: the only nodes
        whose room can ever matter to it."""
        shape = self._shape(pod)
        if i not in shape.position:
            return False
        holds = shape.holds.get(i)
        if holds is None:
            holds = shape.holds[i] = fits_in(self.nodes[i].allocatable, shape.items, 1) > 0
        return holds

    def lacking(self, pod: PodSpecView) -> set[str]:
        """What the nodes that may take the pod, and could hold one, were found short of for
        one more when it was placed this cycle: what all of them lacked."""
        return set(self._shape(pod).every or ())

    def fit(self, pod: PodSpecView, i: int, extra: Mapping[str, int] | None, most: int) -> int:
        """How many of the pods fit on node ``i`` (with ``extra`` room given back), at most
        ``most``. For pods all alike, first fit places as many as these add up to."""
        return fits_in(self.free[i], self._shape(pod).items, most, extra or None)

    # Placing -------------------------------------------------------------------------------
    def place(
        self,
        pod: PodSpecView,
        count: int,
        extra: Mapping[int, Mapping[str, int]] | None = None,
        *,
        partial: bool = False,
    ) -> Assignment | None:
        """Where ``count`` pods go, first fit; None when they do not all fit (with ``partial``,
        as many as fit). ``extra`` is room on some nodes as if victims had left them."""
        if count <= 0:
            return []
        shape = self._shape(pod)
        memo = extra is None and not partial
        if memo and self._failed_before(shape, count):
            return None
        known = shape.fitted
        if extra is None and known is not None and known[0] == self.version and count <= known[1]:
            # Room is as it was when as many or more fitted: first fit takes the same nodes.
            return _first(known[2], count)
        out, left = self._first_fit(shape, count, extra)
        if left and not partial:
            if memo and (not shape.failed or count < shape.failed):  # (else known already)
                shape.failed, shape.failed_read = count, len(self.grown)
            return None
        if not left and extra is None:
            shape.fitted = (self.version, count, out)
        return out

    def _failed_before(self, shape: _Shape, count: int) -> bool:
        """Whether as few of its pods or fewer were found not to fit, and room has been given
        back on none of the nodes they may go on since."""
        if not shape.failed or count < shape.failed:
            return False
        grown = self.grown
        if shape.failed_read < len(grown):  # room given back since: on a node of its?
            position = shape.position
            if any(i in position for i in itertools.islice(grown, shape.failed_read, None)):
                shape.failed = 0
            shape.failed_read = len(grown)
        return bool(shape.failed)

    def _first_fit(
        self, shape: _Shape, count: int, extra: Mapping[int, Mapping[str, int]] | None
    ) -> tuple[Assignment, int]:
        """Where first fit puts up to ``count`` pods, and how many of them found no room;
        what it learnt is kept in ``shape``."""
        eligible, position, cursor, early = (
            shape.eligible,
            shape.position,
            shape.cursor,
            shape.early,
        )
        if shape.read < len(self.grown):
            grown = [p for i in self.grown[shape.read :] if (p := position.get(i, cursor)) < cursor]
            if grown:
                early = sorted({*early, *grown})
        before = early
        if extra:
            # Room given back on some nodes before the cursor: they may take a pod now.
            grown = [p for i in extra if (p := position.get(i, cursor)) < cursor]
            if grown:
                before = sorted({*early, *grown})
        items = shape.items
        out: Assignment = []
        left = count
        fitted: list[int] = []  # positions where a pod fits
        last = -1  # the last position looked at
        rest = range(cursor, len(eligible))
        for pos in itertools.chain(before, rest) if before else rest:
            last = pos
            i = eligible[pos]
            free = self.free[i]
            if extra is not None and i in extra:
                free = dict(free)
                add_room(free, extra[i])
            n = fits_in(free, items, left)
            if n:
                fitted.append(pos)
                out.append((i, n))
                left -= n
                if not left:
                    break
            elif ((every := shape.every) is None or every) and fits_in(
                self.nodes[i].allocatable, items, 1
            ):  # once nothing is lacked by all, that stays so: no need to look again
                lacking = {r for r, a in items if free.get(r, 0) < a}
                shape.every = lacking if every is None else every & lacking
        # What was looked at and took no pod never will until room is given back there (with
        # ``extra`` it had more room than it has, so that holds all the more).
        shape.early = [p for p in early if p > last or p in fitted] if early else early
        if last >= cursor:
            shape.cursor = next((p for p in fitted if p >= cursor), len(eligible))
        shape.read = len(self.grown)
        return out, left

    def place_all(
        self,
        pods: Sequence[tuple[PodSpecView, int]],
        extra: Mapping[int, Mapping[str, int]] | None = None,
    ) -> Footprint | None:
        """Where pods of several shapes go at once (a workload's pod sets), or None when they
        do not all fit: first fit, the largest pods first, each shape on the room the ones
        before it left. ``extra`` as for ``place``. Workloads of one pod set use ``place``,
        which remembers what it learnt; this looks at every node each time."""
        out: Footprint = {}
        for pod, count in sorted(pods, key=lambda entry: -self.size(entry[0])):
            left = count
            items = self._shape(pod).items
            for i in self._shape(pod).eligible if left > 0 else ():
                free = dict(self.free[i])
                if extra is not None and i in extra:
                    add_room(free, extra[i])
                if i in out:
                    add_room(free, out[i], -1)
                n = fits_in(free, items, left)
                if n:
                    add_room(out.setdefault(i, {}), {r: a * n for r, a in pod.request.items()})
                    left -= n
                    if not left:
                        break
            if left > 0:
                return None
        return out

    def size(self, pod: PodSpecView) -> float:
        """A pod's dominant share of the usable nodes' room: what "largest first" compares."""
        total = self.total
        return max(
            (a / total[r] if total.get(r) else float("inf") for r, a in pod.request.items()),
            default=0.0,
        )

    # Words ---------------------------------------------------------------------------------
    def explain(self, pod: PodSpecView, count: int) -> str:
        """Why ``count`` pods do not fit at once, in the words of a pending reason."""
        key = (pod, count)
        text = self._explained.get(key)
        if text is None:
            text = self._explained[key] = self._explain(pod, count)
        return text

    def _explain(self, pod: PodSpecView, count: int) -> str:
        eligible = self.eligible(pod)
        if not eligible:
            return self._no_node(pod)
        items = self._shape(pod).items
        among = (
            f" (among the {len(eligible)} of {len(self.nodes)} nodes its pods may go on)"
            if len(eligible) < len(self.nodes)
            else ""
        )
        partial = self.place(pod, count, {}, partial=True) or []
        placed = sum(n for _, n in partial)
        if placed:
            where = ", ".join(f"{self.nodes[i].name} {n}" for i, n in partial[:3])
            more = ", ..." if len(partial) > 3 else ""
            return (
                f"only {placed} of its {count} pods of {pod.request.describe()} fit on the nodes"
                f" at once ({where}{more}){among}"
            )
        # Not one pod fits: name the resource no node has enough of, the furthest short first.
        best = self._most_free(pod)
        short = sorted(
            ((a - best.get(r, (0, 0))[0]) / a, r) for r, a in items if best.get(r, (0, 0))[0] < a
        )
        if short:
            r = short[-1][1]
            if r not in best:
                return f"no node has {r}{among}"
            have, i = best[r]
            return (
                f"no node can hold a pod of {describe_amount(r, pod.request[r])}: the most"
                f" free on one node is {describe_amount(r, max(have, 0))}"
                f" ({self.nodes[i].name}){among}"
            )
        # Each resource fits somewhere, never all on one node: show the node closest to it.
        closest = min(
            eligible,
            key=lambda j: sum(1 for r, a in items if self.free[j].get(r, 0) < a),
        )
        room = ", ".join(
            describe_amount(r, max(self.free[closest].get(r, 0), 0)) for r, _ in sorted(items)
        )
        return (
            f"no node can hold a pod of {pod.request.describe()} at once: the closest is"
            f" {self.nodes[closest].name} with {room} free{among}"
        )

    def _most_free(self, pod: PodSpecView) -> dict[str, tuple[int, int]]:
        """Resource -> (the most free on one node the pod may go on, that node), for the
        resources those nodes have; the first such node in order on a tie."""
        key = pod.constraints
        found = self._most.get(key)
        if found is None:
            found = self._most[key] = {}
            for i in self.eligible(pod):
                for r in self.nodes[i].allocatable:
                    have = self.free[i].get(r, 0)
                    if r not in found or have > found[r][0]:
                        found[r] = (have, i)
        return found

    def _no_node(self, pod: PodSpecView) -> str:
        if not self.nodes:
            return "the cluster has no nodes"
        counts: dict[str, int] = {}
        for node in self.nodes:
            why = refusal(pod, node) or ""
            counts[why] = counts.get(why, 0) + 1
        parts = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return "no node may take its pods: " + ", ".join(f"{n} {why}" for why, n in parts)
