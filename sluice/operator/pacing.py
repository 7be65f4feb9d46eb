"""When the scheduling loop runs its passes: the timing policy, pure, on an injected clock.

The loop asks it, at every wake, whether to re-read the scheduler configuration, whether to
run a decision pass, and whether a full pass may start; between wakes, how long it may sleep.
It reads the clock it is given and nothing else, so its tests step a fake clock and never
sleep. The rules:

- a change that may let a job in runs a decision pass at once; so does the resync, every
  ``resync_seconds``, and a full pass that found decisions none took (``decide_again``);
- a full pass is due after a change that may let a job in, and after any other change or the
  resync once the last full pass is ``resync_seconds`` old: what only statuses show (pods
  starting, the answers to a pass's own writes) waits for the resync's full pass and decides
  nothing;
- a due full pass starts ``full_pass_seconds`` after the last one started, once the changes
  that may let a job in have paused for a fifth of that, and at most ``resync_seconds`` later
  while they do not pause: a stream of changes is decided without a full pass beside each
  decision for the processor.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

Clock = Callable[[], float]
"""Seconds on a monotonic scale (``time.monotonic`` in the operator)."""

LOOK_AGAIN_SECONDS = 0.2
"""How soon the loop looks again while a full pass is due but another still runs."""


@dataclass(frozen=True)
class Timing:
    debounce_seconds: float = 0.02
    """The pause after a change before the decision pass, that folds a burst into one."""
    batch_seconds: float = 1.0
    """How long a change that only statuses show waits for one that may let a job in."""
    resync_seconds: float = 10.0
    full_pass_seconds: float = 5.0
    retry_seconds: float = 1.0
    """How soon a pass that could not run (no configuration yet, writes of unsure outcome, a
    failed relist or pass) is tried again."""


class Pacing:
    """The loop's timing state and the rules above; every time is read from ``clock``."""

    def __init__(self, timing: Timing, clock: Clock = time.monotonic) -> None:
        self.timing = timing
        self.clock = clock
        self.config_read_at = float("-inf")
        self.decided_at = float("-inf")
        self.full_started_at = float("-inf")
        """When the last full pass started."""
        self.urgent_at = float("-inf")
        """When the last change that may let a job in arrived."""
        self.full_due = True
        """Something changed since the last full pass started."""
        self.decide_due = False
        """A full pass found decisions no decision pass took since its snapshot: the next
        wake runs a decision pass, whatever woke it."""
        self.waited = 0.0
        """How long the change that woke the current pass waited for it (s)."""

    def woken(self, urgent: bool, urgent_since: float) -> None:
        """A wake; ``urgent_since``: when the change that may let a job in arrived, if one
        did."""
        if urgent:
            self.urgent_at = urgent_since
            self.waited = self.clock() - urgent_since
        else:
            self.waited = 0.0

    def config_due(self) -> bool:
        """Whether the scheduler configuration is read again at this wake."""
        return self.clock() - self.config_read_at > self.timing.resync_seconds

    def config_read(self) -> None:
        self.config_read_at = self.clock()

    def config_unread(self) -> None:
        """The configuration could not be read: it is read again at the next wake."""
        self.config_read_at = float("-inf")

    def decides(self, changed: bool, urgent: bool) -> bool:
        """Whether this wake runs a decision pass (a change woke it: ``changed``; one that
        may let a job in: ``urgent``); a full pass becomes due on the way when it should."""
        now = self.clock()
        resync = now - self.decided_at >= self.timing.resync_seconds
        stale = now - self.full_started_at >= self.timing.resync_seconds
        if urgent or ((changed or resync) and stale):
            self.full_due = True
        if urgent or resync or self.decide_due:
            self.decided_at = now
            self.decide_due = False
            return True
        return False

    def decide_again(self) -> None:
        """Run a decision pass at the next wake, though no change may let a job in."""
        self.decide_due = True

    def full_again(self) -> None:
        """A full pass failed: another is due."""
        self.full_due = True

    def full_from(self) -> float:
        """When a due full pass may start."""
        timing = self.timing
        earliest = self.full_started_at + timing.full_pass_seconds
        quiet = self.urgent_at + timing.full_pass_seconds / 5
        return max(earliest, min(quiet, earliest + timing.resync_seconds))

    def full_due_now(self) -> bool:
        """Whether a due full pass starts now (none is running): if so, it is started."""
        if not self.full_due or self.clock() < self.full_from():
            return False
        self.full_due = False
        self.full_started_at = self.clock()
        return True

    def until_due(self, leading: bool, full_running: bool) -> float:
        """Seconds the loop may sleep: until the resync, or until the next full pass may
        start when one is due (soon again while one still runs: it may be over by then)."""
        wait = self.timing.resync_seconds
        if self.full_due and leading:
            if full_running:
                return min(wait, LOOK_AGAIN_SECONDS)
            wait = min(wait, max(self.full_from() - self.clock(), 0.0))
        return wait
