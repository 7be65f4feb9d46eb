"""A stopping replica ends within its bound, even with a thread that never ends."""

from __future__ import annotations

import subprocess
import sys
import textwrap

STUCK = textwrap.dedent(
    """
    import logging, threading
    from sluice.operator.exiting import end_within

    logging.basicConfig(level="INFO", format="%(message)s")
    end_within(0.5, 3)
    # Not a daemon: the interpreter waits for it at exit, forever but for the bound.
    threading.Thread(target=threading.Event().wait, name="stuck-writer").start()
    """
)


def test_a_process_held_by_a_thread_that_never_ends_ends_at_the_bound_with_its_status() -> None:
    done = subprocess.run([sys.executable, "-c", STUCK], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert "event=stop-overdue seconds=0.5 status=3" in done.stderr
    assert "stuck-writer" in done.stderr.split("threads=")[1]


def test_a_process_that_ends_by_itself_keeps_its_own_status() -> None:
    ends = STUCK.replace('threading.Thread(target=threading.Event().wait, name="stuck-writer")'
                         '.start()', "raise SystemExit(0)")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", ends], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "stop-overdue" not in done.stderr
