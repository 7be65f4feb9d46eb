"""What a Session works out that the next one would work out again: kept from one session
to the next by the decision pass (sluice/scheduler/decision_pass.py), which runs a session
on every event.

A session on a cluster of 10,000 queues spends most of its time on what the few jobs of an
event do not change: the node index, a record per queue, each queue's request and each
parent's split of its deserved among its children. Handed a ``Kept``, a session takes these
from it where their inputs are the same as last time and works out anew only the rest, with
the one implementation the full cycle uses (``Session``): what is kept is only ever a result
of that code on the same inputs.

- The node index (``Placement``'s order, total and which nodes may take each set of
  constraints) while the nodes are the same; each session gets its own room on them.
- The record of each queue (``QueueInfo``) while the queues' specs and the priority
  classes are the same: the records are used again, cleared of the last session's jobs.
- Each queue's request while what it adds up to is the same, and each parent's split
  (``deserved.split``) while its deserved and its children's claims are the same: a new
  job in one leaf splits again the parents on its path, and below them only the subtrees
  whose deserved moved.
- What the pods take of the nodes as if no workload owned any, while the pods and the nodes
  are the same (from the second session that sees them): a session then looks only at the
  pods of its admitted workloads.
- What follows from the queues' specs alone (``SpecMemo``): the tree, its violations and
  each queue's realCapability.

The full cycle (``cycle.run_cycle``) keeps only a ``SpecMemo``, when its caller hands it one:
its session works out everything else. Each pass keeps its own: the two passes run on two
threads, and nothing kept is shared between them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, KeysView, Sequence
from operator import is_
from typing import TypeVar

from sluice.api.queue import Queue, QueueSpec
from sluice.api.resources import EMPTY, Resources
from sluice.api.views import NodeView, PodView
from sluice.queues.tree import QueueTree
from sluice.scheduler.placement import Placement
from sluice.scheduler.records import QueueInfo

T = TypeVar("T")


class SpecMemo:
    """What follows from the queues' specs alone, left by one session for the next of the
    same pass: the last tree and its violations (``session.queue_tree``), and each queue's
    realCapability for those specs and a cluster total (``Session._derive``)."""

    __slots__ = ("real", "tree")

    def __init__(self) -> None:
        self.tree: tuple[tuple[tuple[Queue, ...], int], tuple[QueueTree, dict[str, str]]] | None
        self.tree = None
        """(the queues, the maximum depth) and the tree and violations they make."""
        self.real: tuple[dict[str, str], Resources, dict[str, Resources]] | None = None
        """The violations dict of ``tree`` (the very same object: the same specs), the
        cluster's total, and the realCapability of each queue they make."""


class Kept:
    """The results one session leaves for the next (see the module)."""

    def __init__(self) -> None:
        self.specs = SpecMemo()
        self.nodes: tuple[NodeView, ...] = ()
        self.placement: Placement | None = None
        self.total: Resources = EMPTY
        """The cluster's total of ``placement``, added up by the first session on it: one
        object while the nodes stay the same (what is kept below it is compared by identity).
        The decision pass's frame needs the placement alone."""
        self.total_of: Placement | None = None
        """The ``placement`` that ``total`` was added up on."""
        self.queues_from: tuple[object, ...] | None = None
        """What ``queues`` follow from: the queues' specs (the very same violations dict of
        ``session.queue_tree``) and the priority classes."""
        self.queues: dict[str, QueueInfo] = {}
        self.order: list[QueueInfo] = []
        """The queues by (depth, name): the order the tree is derived in."""
        self.deepest_first: list[QueueInfo] = []
        self.requests: dict[str, tuple[tuple[object, ...], Resources]] = {}
        """Queue -> what its request was added up from (a parent's: its children's requests;
        a leaf's: the amounts, in order), and the request."""
        self.splits: dict[str, tuple[tuple[object, ...], tuple[Resources, ...]]] = {}
        """Parent -> what its split rests on (its deserved, its children's claims, the
        plugin), and its children's deserved from it, in the order of its children."""
        self.capped: dict[str, tuple[tuple[object, ...], Resources]] = {}
        """Queue -> what its deserved rests on under the capacity plugin, and that deserved."""
        self.pods_taken: PodsTaken | None = None
        self.pods_seen: tuple[PodView, ...] = ()
        self.pods_seen_on: Placement | None = None

    def forget_all_but(self, queues: KeysView[str]) -> None:
        """Drop what is kept of queues that are gone."""
        for memo in (self.requests, self.splits, self.capped):
            for name in memo.keys() - queues:
                del memo[name]

    def pods_seen_again(self, pods: Sequence[PodView]) -> bool:
        """Whether these are the pods the last session saw, on the same nodes (remembered
        either way). What the pods take is kept only for pods seen twice in a row: were
        they new on every pass, keeping it would cost more than it saves."""
        again = self.pods_seen_on is self.placement and same_list(pods, self.pods_seen, as_is)
        self.pods_seen, self.pods_seen_on = tuple(pods), self.placement
        return again

    def placement_for(self, nodes: Sequence[NodeView]) -> Placement:
        """A placement of the nodes with their whole room free: the node index of the last
        one while the nodes are the same."""
        if self.placement is not None and same_list(nodes, self.nodes, as_is):
            return Placement(nodes, like=self.placement)
        self.nodes = tuple(nodes)
        self.placement = Placement(self.nodes)
        return self.placement


class PodsTaken:
    """What the pods take of the nodes as if no workload owned any of them: each node's
    free room and, summed, the room they take (``Session._take_room``), with where each
    workload's pods are among them, to find an admitted workload's pods without looking
    at the others."""

    def __init__(
        self,
        pods: Sequence[PodView],
        placement: Placement | None,
        free: list[dict[str, int]],
        used: dict[str, int],
    ) -> None:
        self.pods = tuple(pods)
        self.placement = placement
        self.free = free
        self.used = used
        self.by_uid: dict[str, list[int]] = {}
        self.by_label: dict[tuple[str, str, str], list[int]] = {}
        for at, pod in enumerate(self.pods):
            if pod.job_uid:
                self.by_uid.setdefault(pod.job_uid, []).append(at)
            for label, name in pod.named_by:
                self.by_label.setdefault((pod.namespace, label, name), []).append(at)

    def holds(self, pods: Sequence[PodView], placement: Placement | None) -> bool:
        """Whether this was taken of these pods, on the same nodes."""
        return placement is self.placement and same_list(pods, self.pods, as_is)

    def of(self, uids: Iterable[str], labels: Iterable[tuple[str, str, str]]) -> list[PodView]:
        """The pods with one of these controller uids or (namespace, label, value), in the
        order they were taken in."""
        at: set[int] = set()
        for uid in uids:
            at.update(self.by_uid.get(uid, ()))
        for label in labels:
            at.update(self.by_label.get(label, ()))
        return [self.pods[i] for i in sorted(at)]


def same_list(now: Sequence[T], before: Sequence[T], key: Callable[[T], object]) -> bool:
    """Whether two lists hold the same items by ``key``, in order; the items compared only
    where they are not the very same (the views kept from one pass to the next)."""
    if len(now) != len(before):
        return False
    return all(map(is_, now, before)) or all(
        a is b or key(a) == key(b) for a, b in zip(now, before, strict=True)
    )


def as_is(view: object) -> object:
    return view


def name_and_spec(queue: Queue) -> tuple[str, QueueSpec]:
    """What a queue is compared by where only its spec counts (not its status)."""
    return queue.name, queue.spec
