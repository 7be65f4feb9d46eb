"""The soak's figures: faults by kind, workloads by fate, recovery per kind of fault (heal,
or kill, to the next decision the watch saw: p50 / p99 / max), decisions per minute beside a
soak of the same length and seed with no faults, and each leader partition's handover."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from chaos import audit
from chaos.faults import Fault
from chaos.load import Submission
from chaos.observe import Observer
from chaos.system import LEASE_SECONDS


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def recovery(
    faults: list[Fault], decisions: list[tuple[float, str, str]]
) -> dict[str, list[float]]:
    times = sorted(t for t, _, _ in decisions)
    found: dict[str, list[float]] = {}
    for fault in faults:
        after = next((t for t in times if t >= fault.healed), None)
        if after is not None:
            found.setdefault(fault.kind, []).append(after - fault.healed)
    return found


def print_report(
    observer: Observer,
    submissions: list[Submission],
    faults: list[Fault],
    window: tuple[float, float],
    audit_log: Path,
    baseline: Path,
    with_faults: bool,
    log: Callable[[str], None],
) -> None:
    start, end = window
    minutes = (end - start) / 60
    with observer._lock:
        history = dict(observer.history)
        decisions = list(observer.decisions)
    taken = Counter(s.kind for s in submissions if s.accepted)
    refused = Counter(s.kind for s in submissions if not s.accepted)
    evictions = Counter(why for h in history.values() for _, why in h.evictions)
    print("\nworkloads")
    print(f"  submitted: {dict(taken)} accepted, {dict(refused)} refused")
    print(f"  seen {len(history)}: admitted {sum(1 for h in history.values() if h.admissions)},"
          f" finished {sum(1 for h in history.values() if h.finished)},"
          f" reclaimed {evictions['reclaim']}, requeued {evictions['requeue']},"
          f" suspended otherwise {evictions['suspend']}")  # fmt: skip
    print(f"  watch: {observer.events} events, {observer.gaps} relists after a gap")
    decided = sum(1 for t, _, _ in decisions if start <= t <= end)
    rate = decided / minutes if minutes else 0.0
    print("\ndecisions per minute (admissions and evictions the watch saw)")
    key = f"{round(minutes)}"
    known = json.loads(baseline.read_text()) if baseline.exists() else {}
    if with_faults:
        base = known.get(key)
        beside = (
            f"; no faults: {base:.1f}, ratio {rate / base:.2f}"
            if base
            else ("; no baseline yet (CHAOS_FAULTS=0 with the same minutes and seed)")
        )
        print(f"  with faults: {rate:.1f}{beside}")
    else:
        known[key] = rate
        baseline.write_text(json.dumps(known))
        print(f"  no faults: {rate:.1f} (kept in {baseline} for the soak with faults)")
    if not faults:
        return
    print("\nfaults")
    for kind, count in sorted(Counter(f.kind for f in faults).items()):
        print(f"  {kind:<26} {count}")
    found = audit.writes(audit_log)
    written = [(w.at, w.decision, w.name) for w in found if w.decision]
    print(f"\nrecovery: heal (or kill) to the next admission or eviction the API server took,"
          f" seconds (Lease {LEASE_SECONDS} s)")  # fmt: skip
    print(f"  {'fault':<26} {'n':>3} {'p50':>7} {'p99':>7} {'max':>7}")
    for kind, values in sorted(recovery(faults, written).items()):
        print(f"  {kind:<26} {len(values):>3} {percentile(values, 0.5):>7.1f}"
              f" {percentile(values, 0.99):>7.1f} {max(values):>7.1f}")  # fmt: skip
    partitions = [f for f in faults if f.kind == "partition-leader"]
    if partitions:
        print("\nleader partitions: the partitioned leader's last write, the next leader's first")
        for fault in partitions:
            moved = audit.handover(
                found, fault.leader, fault.began, fault.healed + 3 * LEASE_SECONDS
            )
            if moved is None:
                print(f"  {fault.detail}: healed before the Lease passed (no other writer)")
                continue
            decision = (f", first decision {moved.first_decision - moved.last_old:.1f} s"
                        if moved.first_decision else "")  # fmt: skip
            overlap = " OVERLAP" if moved.first_new <= moved.last_old else ""
            print(f"  {fault.detail}: {moved.new} took the Lease"
                  f" {moved.first_new - moved.last_old:.1f} s after {moved.old}'s last write"
                  f"{decision}{overlap}")  # fmt: skip
