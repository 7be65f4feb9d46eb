"""How long the watches take to bring back the operator's own writes.

Each write to a workload or a Queue is answered with the object as stored, and the watch
brings the same version (or a newer one) later. The time between the two is how far behind
the watches run (``sluice_watch_echo_seconds``): the state's view lags the API server by it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sluice.api.objects import Obj
from sluice.operator.stored import version_of

ECHOES = 10_000
"""The most of the operator's own writes awaited on the watches at once (the oldest is
forgotten first)."""


class Echoes:
    """The operator's writes awaited on the watches: where (kind/key) -> the version written
    and when it landed, until the watch brings that version or a newer one.

    It shares the state's lock: a write checks whether the watch brought it back already and
    awaits it in one step, so that a watch event stored meanwhile is never missed (the
    watches run on threads of their own)."""

    def __init__(
        self,
        lock: threading.Lock,
        observe: Callable[[float], None],
        clock: Callable[[], float],
        most: int = ECHOES,
    ) -> None:
        self._lock = lock
        self._observe = observe
        self._clock = clock
        self._most = most
        self.awaited: dict[str, tuple[int, float]] = {}
        """kind/key -> the version written and when it landed (by ``clock``)."""

    def sent(self, at: str, version: int | None, stored: Callable[[], int | None]) -> None:
        """The operator wrote ``version`` of the object at ``at``; ``stored()`` (called under
        the lock) is the version the state holds of it now. Called before the answer is
        stored, while a watch event is stored before it is timed (``seen``): so a watch that
        brought the write back before its answer was stored is told here, as no wait."""
        if version is None:
            return
        with self._lock:
            back = (stored() or 0) >= version
            if not back:
                awaited = self.awaited
                awaited.pop(at, None)  # re-inserted last: the oldest stay first
                awaited[at] = (version, self._clock())
                while len(awaited) > self._most:
                    del awaited[next(iter(awaited))]
        if back:
            self._observe(0.0)

    def seen(self, at: str, obj: Obj) -> None:
        """A watch event of the object at ``at``: when it brings back (or passes) the
        operator's last write there, observe how long that took."""
        if self.awaited.get(at) is None:  # most events: no lock taken (the watch waits on it)
            return
        version = version_of(obj)
        with self._lock:
            waited = self.awaited.get(at)
            if waited is None or version is None or version < waited[0]:
                return
            del self.awaited[at]
        self._observe(self._clock() - waited[1])
