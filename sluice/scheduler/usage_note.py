"""Which sibling a waiting job's queue goes after because of usage over time, for its
pending reason (docs/scheduler.md, *Pending reasons*)."""

from __future__ import annotations

from sluice.api.config import format_duration
from sluice.api.usage_text import behind_note
from sluice.scheduler.session import Session


class UsageNotes:
    """Per queue, the note its waiting jobs carry: the highest level at which a sibling of
    the same queue priority that used less per unit of weight, and wants room (it has jobs
    waiting, or admitted some this cycle), goes first; "" when none does."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.wanting: set[str] = set()
        self.notes: dict[str, str] = {}
        for name, info in session.queues.items():
            if any(not j.admitted or j.fresh for j in info.pending_jobs) or any(
                j.fresh for j in info.admitted_jobs
            ):
                self.wanting.update(session.chain(name))

    def note(self, queue: str) -> str:
        settings = self.session.usage_settings
        if settings is None or queue not in self.session.queues:
            return ""
        if queue not in self.notes:
            self.notes[queue] = self._note(queue, format_duration(settings.half_life))
        return self.notes[queue]

    def _note(self, queue: str, half_life: str) -> str:
        session = self.session
        for name in reversed(session.chain(queue)):
            info = session.queues[name]
            if info.parent is None:
                continue
            mine = session.usage_key(name)
            ahead = [
                (session.usage_key(s), s)
                for s in session.queues[info.parent].children
                if s != name
                and s in self.wanting
                and session.queues[s].priority == info.priority
                and session.usage_key(s) < mine
            ]
            if ahead:
                return behind_note(name, min(ahead)[1], half_life)
        return ""
