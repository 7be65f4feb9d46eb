"""Starting, recognising and stopping the control plane's processes.

A process is known by its pid and binary: after a reboot a pid may belong to anything, so a
pid counts as ours only while /proc says it runs the binary we started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

STOP_TIMEOUT = 15.0


def log(message: str) -> None:
    print(f"[controlplane] {message}", file=sys.stderr, flush=True)


def set_parent_death_signal() -> None:
    """In the child: die with the parent (the pytest process), never outlive it."""
    import ctypes

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    # SIGKILL: with etcd gone too, a SIGTERMed kube-apiserver hangs in its shutdown hooks.
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


def is_ours(pid: int, binary: Path) -> bool:
    """True when pid is alive and runs `binary` (pids are reused after a reboot)."""
    for _ in range(20):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            reap(pid)
            return False
        if cmdline:
            return cmdline.split(b"\0")[0].decode(errors="replace") == str(binary)
        # Empty while the process is between fork and a finished exec: look again.
        time.sleep(0.05)
    return False


def reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


@dataclass
class Running:
    """A process to stop: started by this Python process (child) or found in state.json."""

    name: str
    pid: int
    binary: Path
    child: subprocess.Popen[bytes] | None = None

    def gone(self) -> bool:
        if self.child is not None:
            return self.child.poll() is not None
        reap(self.pid)
        return not is_ours(self.pid, self.binary)


def stop(processes: list[Running]) -> None:
    """SIGTERM them all at once, wait, then SIGKILL whoever is left."""
    alive = [p for p in processes if not p.gone()]
    for p in alive:
        log(f"stopping {p.name} (pid {p.pid})")
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if not p.gone()]
        if alive:
            time.sleep(0.1)
    for p in alive:
        log(f"{p.name} (pid {p.pid}) ignored SIGTERM; killing it")
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGKILL)
    for _ in range(50):
        alive = [p for p in alive if not p.gone()]
        if not alive:
            return
        time.sleep(0.1)


def tail(path: Path, lines: int = 25) -> str:
    try:
        return "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:])
    except OSError:
        return "(no log)\n"
