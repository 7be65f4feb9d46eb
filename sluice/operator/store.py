"""One kind's store: its objects as the watches bring them, each beside how it reads, and
what a change to one of them means to the scheduling loop.

Every kind is stored the same way. An event older than what is stored never undoes it (the
operator's own writes are stored as soon as the API server answers them, and the watch may
bring an older version after that); an answer older than a deletion never brings the object
back (``Tombstones``); a change wakes the loop unless the object reads as it did. What
differs by kind is policy, and each kind's store (``stores.py``) says it by overriding:

- ``kept``: what is kept of the object (by default the object without managedFields);
- ``keep``: the read to store, which may share parts of the one before;
- ``unseen``: a change no cycle looks at, which wakes nothing;
- ``minor``: a change that cannot let a job in, which the loop may batch with others;
- ``stored``: what else is kept of an object stored or forgotten;
- ``read_changed``: told of each key whose read changed.

A store is not thread-safe: the state (``ClusterState``) calls it under its lock.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from enum import Enum
from typing import Generic, TypeVar

from sluice.api.objects import Obj
from sluice.operator.stored import version_of
from sluice.operator.tombstones import Tombstones
from sluice.scheduler.snapshot import Read


class Wake(Enum):
    """What a stored change asks of the scheduling loop."""

    NOTHING = "nothing"
    """Nothing a cycle looks at changed."""
    SOON = "soon"
    """The next cycle shows it, but it lets no job in: the loop may wait to batch it."""
    NOW = "now"
    """It may let a job in, or must be acted on."""


def bare(obj: Obj) -> Obj:
    """The object without ``metadata.managedFields``: the API server's record of which client
    wrote which field, which nothing here reads or writes, and about half of what a stored
    Job takes in memory (every writer of the object adds to it)."""
    meta = obj.get("metadata")
    if not meta or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def gone(obj: Obj) -> bool:
    """A write answered with a deleting object that has no finalizer left: it is gone."""
    meta = obj.get("metadata") or {}
    return meta.get("deletionTimestamp") is not None and not meta.get("finalizers")


Table = TypeVar("Table", bound=MutableMapping[str, Obj])


class Store(Generic[Table]):
    """The objects of one kind (or of several kinds that share one table of keys) by key,
    and each one's read, by kind then key."""

    def __init__(
        self, name: str, kinds: tuple[str, ...], objects: Table, tombstones: Tombstones
    ) -> None:
        self.name = name
        """Unique among the stores: where its tombstones lie."""
        self.kinds = kinds
        self.objects = objects
        self.reads: dict[str, dict[str, Read]] = {kind: {} for kind in kinds}
        """Kind -> key -> the stored object as read."""
        self.revision = 0
        """Counts the changes to its reads other than those ``unseen`` allows: the same
        number means the same reads, as a cycle sees them."""
        self._tombstones = tombstones

    def version(self, key: str) -> int | None:
        """The stored object's resourceVersion."""
        return version_of(self.objects.get(key))

    def put(self, kind: str, key: str, obj: Obj, seen: Read, own: bool = False) -> Wake:
        """Keep the object (``obj``, read as ``seen``) unless something newer is stored or
        it was deleted since; ``own``: it is the answer to the operator's own write."""
        version = version_of(obj)
        have = self.version(key)
        if have is not None and version is not None and version < have:
            return Wake.NOTHING  # an older event must not undo our write
        at = f"{self.name}/{key}"
        if self._tombstones.holds(at, version):
            return Wake.NOTHING  # an answer older than the deletion: the object is gone
        self._tombstones.lift(at)
        unseen = self.unseen(key, obj)
        self.objects[key] = self.kept(obj)
        reads = self.reads[kind]
        before = reads.get(key)
        seen = reads[key] = self.keep(before, seen)
        self.stored(key, obj)
        if before == seen:
            return Wake.NOTHING
        self.read_changed(key)
        if unseen:
            return Wake.NOTHING
        self.revision += 1
        return Wake.SOON if self.minor(before, seen, obj, own) else Wake.NOW

    def forget(self, kind: str, key: str, version: int | None) -> None:
        """The object was deleted (at ``version``, when known)."""
        if key in self.objects:
            del self.objects[key]
        if self.reads[kind].pop(key, None) is not None:
            self.revision += 1
            self.read_changed(key)
        self.stored(key, None)
        if version is not None:
            self._tombstones.bury(f"{self.name}/{key}", version)

    # The policy of the kind: each store overrides what differs for its kind.

    def kept(self, obj: Obj) -> Obj:
        """What is kept of an object stored."""
        return bare(obj)

    def keep(self, before: Read | None, seen: Read) -> Read:
        """The read to store, given the one stored before."""
        return seen

    def unseen(self, key: str, obj: Obj) -> bool:
        """Whether ``obj`` differs from the object stored under ``key`` (asked before it is
        replaced) only in what no cycle looks at."""
        return False

    def minor(self, before: Read | None, seen: Read, obj: Obj, own: bool) -> bool:
        """Whether a change of read (``before`` to ``seen``) cannot let a job in."""
        return False

    def stored(self, key: str, obj: Obj | None) -> None:
        """Keep what else is read of an object stored (None: forgotten)."""

    def read_changed(self, key: str) -> None:
        """The read under ``key`` changed (or was forgotten)."""
