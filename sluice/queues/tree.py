"""The queue hierarchy as a tree, built once per snapshot or admission request.

It tolerates broken input (a missing parent, a cycle): those are recorded in ``problems()``
rather than raised, because the operator must keep scheduling the healthy rest of the cluster
and the webhooks must explain, not crash.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from sluice.api.constants import ROOT_QUEUE
from sluice.api.queue import Queue


def self_parent(name: str) -> str:
    return f"queue {name} cannot be its own parent"


def missing_parent(name: str, parent: str) -> str:
    return f"queue {name}: parent {parent} does not exist"


def parent_cycle(name: str, through: str) -> str:
    return f"queue {name}: its parents would form a cycle through {through}"


class QueueTree:
    __slots__ = ("_ancestors", "_children", "_depth", "_parent", "_problems", "queues")

    def __init__(self, queues: Mapping[str, Queue]) -> None:
        self.queues: Mapping[str, Queue] = queues
        self._parent: dict[str, str | None] = {}
        children: dict[str, list[str]] = {name: [] for name in queues}
        self._problems: dict[str, str] = {}
        for name, queue in queues.items():
            parent = queue.parent
            if parent is not None and parent == name:
                self._problems[name] = self_parent(name)
                parent = None
            elif parent is not None and parent not in queues:
                self._problems[name] = missing_parent(name, parent)
            self._parent[name] = parent
            if parent is not None and parent in children:
                children[parent].append(name)
        self._children = {name: tuple(sorted(kids)) for name, kids in children.items()}
        self._ancestors: dict[str, tuple[str, ...]] = {}
        self._depth: dict[str, int] = {}
        for name in sorted(queues):
            self._walk(name)

    @classmethod
    def build(cls, queues: Mapping[str, Queue]) -> QueueTree:
        return cls(queues)

    def over(self, queues: Mapping[str, Queue]) -> QueueTree:
        """This tree over other views of the very same queues, each with the same parent
        (a status written since, say): the walks are shared, not done again. The caller
        vouches for the names and parents."""
        tree = QueueTree.__new__(QueueTree)
        tree.queues = queues
        tree._parent, tree._children = self._parent, self._children
        tree._ancestors, tree._depth, tree._problems = self._ancestors, self._depth, self._problems
        return tree

    def _walk(self, name: str) -> None:
        chain: list[str] = []
        seen = {name}
        current = self._parent.get(name)
        broken = False
        while current is not None:
            if current in seen:
                self._problems.setdefault(name, parent_cycle(name, current))
                broken = True
                break
            chain.append(current)
            seen.add(current)
            if current not in self.queues:
                broken = True
                break
            current = self._parent.get(current)
        self._ancestors[name] = tuple(chain)
        if not broken and name != ROOT_QUEUE and (not chain or chain[-1] != ROOT_QUEUE):
            self._problems.setdefault(name, f"queue {name} is not under {ROOT_QUEUE}")
        if name in self._problems or any(a in self._problems for a in chain):
            self._problems.setdefault(
                name, f"queue {name}: an ancestor is broken ({self._first_broken(chain)})"
            )
        self._depth[name] = len(chain)

    def _first_broken(self, chain: list[str]) -> str:
        for ancestor in chain:
            if ancestor in self._problems:
                return self._problems[ancestor]
        return "unknown"

    # Queries -----------------------------------------------------------------------------
    def __contains__(self, name: object) -> bool:
        return name in self.queues

    def parent(self, name: str) -> str | None:
        return self._parent.get(name)

    def children(self, name: str) -> tuple[str, ...]:
        return self._children.get(name, ())

    def ancestors(self, name: str) -> tuple[str, ...]:
        """Nearest first, ending at root when the chain is healthy."""
        return self._ancestors.get(name, ())

    def descendants(self, name: str) -> tuple[str, ...]:
        """Depth-first pre-order: every queue comes before its own descendants."""
        out: list[str] = []
        stack = list(reversed(self.children(name)))
        seen = {name}
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            out.append(current)
            stack.extend(reversed(self.children(current)))
        return tuple(out)

    def depth(self, name: str) -> int:
        """root = 0, a child of root = 1."""
        return self._depth.get(name, 0)

    def is_leaf(self, name: str) -> bool:
        return not self.children(name)

    def leaves(self) -> tuple[str, ...]:
        return tuple(sorted(n for n in self.queues if n != ROOT_QUEUE and self.is_leaf(n)))

    def problems(self) -> Mapping[str, str]:
        """Queue -> why its place in the tree is broken (missing parent, cycle, not under root)."""
        return self._problems


class QueueSet(Mapping[str, Queue]):
    """Queues by name with each queue's children indexed: what the webhooks keep, so that a
    Job's review asks "is this queue a leaf?" without walking every queue."""

    __slots__ = ("_children", "_queues")

    def __init__(self, queues: Mapping[str, Queue]) -> None:
        self._queues = dict(queues)
        children: dict[str, list[str]] = {}
        for queue in self._queues.values():
            if queue.parent is not None:
                children.setdefault(queue.parent, []).append(queue.name)
        self._children = {name: tuple(sorted(kids)) for name, kids in children.items()}

    def __getitem__(self, name: str) -> Queue:
        return self._queues[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._queues)

    def __len__(self) -> int:
        return len(self._queues)

    def children(self, name: str) -> tuple[str, ...]:
        return self._children.get(name, ())


def children_of(queues: Mapping[str, Queue], name: str) -> tuple[str, ...]:
    """The queues whose parent is ``name``, sorted; indexed when ``queues`` is a QueueSet."""
    if isinstance(queues, QueueSet):
        return queues.children(name)
    return tuple(sorted(q.name for q in queues.values() if q.parent == name))
