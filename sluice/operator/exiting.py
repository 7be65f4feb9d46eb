"""How a stopping replica ends: within a bound, whatever is still running.

A replica stops on a signal, a lost Lease or a failed task. It stops its tasks, lets Kopf stop
its watches and hands the Lease over; the interpreter then waits for the threads that were
still writing. None of that may keep the process alive for long: a replica that lost the
Lease must end so that Kubernetes starts it again as a follower, and one sent SIGTERM is
killed after its grace period anyway. After ``seconds`` the process ends at once with the
status it was stopping with, and the log names the threads that had not ended.
"""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger("sluice.operator")

STOP_SECONDS = 10.0
"""How long a stopping replica may take to end (``sluice operator run --stop-seconds``):
below the 30 s Kubernetes grants a pod after SIGTERM."""


def end_within(seconds: float, status: int) -> threading.Timer:
    """Ends the process with ``status`` after ``seconds`` unless it has ended by then."""

    def overdue() -> None:
        me = threading.current_thread()
        running = sorted(thread.name for thread in threading.enumerate() if thread is not me)
        log.error(
            "event=stop-overdue seconds=%g status=%d threads=%s",
            seconds,
            status,
            ",".join(running),
        )
        for handler in logging.getLogger().handlers:
            handler.flush()
        os._exit(status)

    timer = threading.Timer(seconds, overdue)
    timer.name = "sluice-stop-bound"
    timer.daemon = True  # it never holds the process itself
    timer.start()
    return timer
