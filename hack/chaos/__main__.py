"""`make chaos`: a fault soak on the living local cluster (hack/chaos/README.md).

    CHAOS_MINUTES (10)  how long faults are injected
    CHAOS_SEED (25)     the seed of every random choice: the faults, their order and
                        lengths, the gaps between them and the workload stream
    CHAOS_SEEDS         several seeds ("25 4242 7"), run in turn, each on a cluster of its
                        own with its state and logs in CHAOS_STATE/seed-<seed>; replaces
                        CHAOS_SEED
    CHAOS_FAULTS (1)    0: the same soak with no faults (its decisions per minute are kept
                        as the baseline the soak with faults is shown beside)
    CHAOS_STATE (.chaos) the cluster's state directory and every log

Ends with `chaos: F faults (K kinds), J jobs, V violations`; exit status 1 when V > 0. With
several seeds, one such line per seed (`chaos seed 4242: ...`) and exit status 1 when any run
has violations (or could not run).
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

HACK = Path(__file__).resolve().parents[1]
REPO = HACK.parent
sys.path.insert(0, str(HACK))

from chaos import checks, load, report, system  # noqa: E402
from chaos.faults import Injector  # noqa: E402
from chaos.observe import Observer  # noqa: E402

SCHEDULER_CONFIG = "podsReadyTimeout: 30s\n"
SETTLE_SECONDS = 90.0


def main() -> int:
    minutes = float(os.environ.get("CHAOS_MINUTES", "10"))
    seeds = [int(seed) for seed in os.environ.get("CHAOS_SEEDS", "").split()]
    with_faults = os.environ.get("CHAOS_FAULTS", "1") != "0"
    state = Path(os.environ.get("CHAOS_STATE", REPO / ".chaos")).resolve()
    if not seeds:
        status, closing = run(minutes, int(os.environ.get("CHAOS_SEED", "25")), with_faults, state)
        print(f"\nchaos: {closing}", flush=True)
        return status
    outcomes = [
        (seed, *_kept(minutes, seed, with_faults, state / f"seed-{seed}")) for seed in seeds
    ]
    print()
    for seed, _, closing in outcomes:
        print(f"chaos seed {seed}: {closing}", flush=True)
    return 1 if any(status for _, status, _ in outcomes) else 0


def _kept(minutes: float, seed: int, with_faults: bool, state: Path) -> tuple[int, str]:
    """One of several soaks: one that fails to run is reported, and the next seed runs."""
    try:
        return run(minutes, seed, with_faults, state)
    except Exception as err:  # noqa: BLE001 - the other seeds still run
        traceback.print_exc()
        return 1, f"failed to run: {err!r}"


def run(minutes: float, seed: int, with_faults: bool, state: Path) -> tuple[int, str]:
    """One soak on a cluster of its own: its exit status and its closing line."""
    began = time.monotonic()

    def log(message: str) -> None:
        elapsed = time.monotonic() - began
        print(f"[chaos {int(elapsed // 60):02d}:{int(elapsed % 60):02d}] {message}", flush=True)

    log(f"{minutes:g} minutes, seed {seed}, faults {'on' if with_faults else 'off'};"
        f" state and logs in {state}")  # fmt: skip
    rng = random.Random(seed)
    cluster = system.up(REPO, state, SCHEDULER_CONFIG, log)
    try:
        return soak(cluster, rng, minutes, seed, with_faults, state, log)
    finally:
        log("stopping the cluster")
        cluster.shutdown()


def soak(
    cluster: system.System,
    rng: random.Random,
    minutes: float,
    seed: int,
    with_faults: bool,
    state: Path,
    log: Callable[[str], None],
) -> tuple[int, str]:
    admin = load.api_client(cluster.cluster.kubeconfig)
    tenants = load.setup(admin, cluster.cluster)
    observer = Observer(admin, log)
    observer.start()
    stream = load.Stream(tenants, admin, random.Random(rng.random()))
    stream.start()
    injector = Injector(cluster, admin, random.Random(rng.random()), log)
    deadline = time.time() + 180
    while not observer.decisions:
        if time.time() > deadline:
            log("nothing admitted within 3 minutes of the start")
            return 1, "nothing admitted within 3 minutes of the start"
        time.sleep(0.5)
    log(f"first admission; the Lease is held by {injector.holder()}")
    unscheduled = checks.Unscheduled(observer, injector.faults)
    unscheduled.start()
    start = time.time()
    end = start + minutes * 60
    ticker = threading.Event()
    threading.Thread(
        target=_minutes, args=(observer, stream, injector, start, ticker, log), daemon=True
    ).start()
    while time.time() < end:
        gap = injector.rng.uniform(4, 12)
        if time.time() + gap + 20 > end or not with_faults:
            time.sleep(max(0.0, min(gap, end - time.time())))
            continue
        time.sleep(gap)
        kind = injector.next_kind()
        log(f"fault {len(injector.faults) + 1}: {kind} ...")
        try:
            fault = injector.inject(kind)
        except Exception as err:  # noqa: BLE001 - a fault that could not be made is reported
            log(f"fault {kind} could not be injected: {err!r}")
            continue
        log(f"fault {len(injector.faults)}: {kind} {fault.detail} (healed after"
            f" {fault.healed - fault.began:.1f} s)")  # fmt: skip
    end = time.time()
    ticker.set()
    stream.stop()
    log(f"faults over; settling (up to {SETTLE_SECONDS:.0f} s) until every workload is"
        " admitted, finished or pending with a reason")  # fmt: skip
    settle_until = time.time() + SETTLE_SECONDS
    while time.time() < settle_until and checks.unaccounted(observer):
        time.sleep(2)
    unscheduled.stop()
    observer.stop()
    logs = [state / f"{name}.log" for name in cluster.replicas]
    checks.run_all(observer, stream.submissions, injector.faults, logs, cluster.audit_log, log)
    report.print_report(
        observer, stream.submissions, injector.faults, (start, end), cluster.audit_log,
        state / f"baseline-seed-{seed}.json", with_faults, log,
    )  # fmt: skip
    violations = observer.violations
    if violations:
        print("\nviolations")
        for text in violations:
            print(f"  {text}")
    kinds = {f.kind for f in injector.faults}
    jobs = sum(1 for s in stream.submissions if s.accepted and s.kind != "group-pod") + len(
        {
            s.key.rsplit("-", 1)[0]
            for s in stream.submissions
            if s.accepted and s.kind == "group-pod"
        }
    )
    closing = (f"{len(injector.faults)} faults ({len(kinds)} kinds), {jobs} jobs,"
               f" {len(violations)} violations")  # fmt: skip
    return (1 if violations else 0), closing


def _minutes(
    observer: Observer,
    stream: load.Stream,
    injector: Injector,
    start: float,
    stop: threading.Event,
    log: Callable[[str], None],
) -> None:
    minute = 0
    while not stop.wait(max(0.0, start + (minute + 1) * 60 - time.time())):
        minute += 1
        with observer._lock:
            history = list(observer.history.values())
            decided = sum(1 for t, _, _ in observer.decisions if t >= start + (minute - 1) * 60)
            violations = len(observer.violations)
        log(f"minute {minute}: {sum(1 for s in stream.submissions if s.accepted)} writes taken,"
            f" {len(history)} workloads seen, {sum(1 for h in history if h.admissions)} admitted,"
            f" {sum(1 for h in history if h.finished)} finished, {decided} decisions this minute,"
            f" {len(injector.faults)} faults, {violations} violations")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
