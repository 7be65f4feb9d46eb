"""The deleted objects the state remembers, so that a late answer to the operator's own write
cannot bring one back.

A write's answer and the watch run on different threads: the watch may tell of a deletion
(a finalizer released, the object gone) before the answer to an earlier write to the same
object is stored. That answer carries an older resourceVersion than the deletion; a
tombstone says so, until a newer version of the object (created again) lifts it.
"""

from __future__ import annotations

TOMBSTONES = 10_000
"""Deleted objects remembered at most (the oldest is forgotten first)."""


class Tombstones:
    """Where (a store and a key) -> the resourceVersion an object was deleted at. Not
    thread-safe: the state calls it under its lock."""

    def __init__(self, most: int = TOMBSTONES) -> None:
        self._most = most
        self._versions: dict[str, int] = {}

    def bury(self, at: str, version: int) -> None:
        """The object at ``at`` was deleted at ``version``."""
        versions = self._versions
        versions[at] = version
        while len(versions) > self._most:
            del versions[next(iter(versions))]

    def holds(self, at: str, version: int | None) -> bool:
        """Whether an object of ``version`` at ``at`` is older than its deletion: then it is
        gone, whatever an answer says."""
        buried = self._versions.get(at)
        return buried is not None and version is not None and version <= buried

    def lift(self, at: str) -> None:
        """The object at ``at`` exists again (or never was deleted)."""
        self._versions.pop(at, None)
