"""Failover on the living local cluster: how soon after the leader dies the next one acts.

Starts its own cluster and two operator replicas sharing one Lease, then ``--kills`` times:
kills the Lease holder with SIGKILL (it cannot hand the Lease over), creates a job in a queue
with room at that moment, and measures the time from the kill to the job's admission, the new
leader's first write. The killed replica is started again each time, so two always run.

Floor: the Lease duration itself. After a crash no replica may write before the dead holder's
Lease has expired, so nothing can act sooner; the target is the floor plus 1 s.

Run: ``.venv/bin/python -m bench.bench_failover [--kills 5] [--lease-seconds 6]``.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.living import living_cluster

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "hack"))

import devenv  # noqa: E402
from controlplane import kwok  # noqa: E402

GROUP, VERSION = "scheduling.sluice.dev", "v1beta1"
NAMESPACE = "failover"
LEASE = "sluice-operator"


def _progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


class Failover:
    def __init__(self, args: Any, cluster: Any, api: Any, state: Path) -> None:
        from kubernetes import client

        self.args = args
        self.cluster = cluster
        self.state = state
        self.core = client.CoreV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.leases = client.CoordinationV1Api(api)
        self.objects = client.CustomObjectsApi(api)
        self.replicas: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, identity: str) -> None:
        self.replicas[identity] = devenv.start_operator(
            self.cluster.kubeconfig,
            self.state / f"{identity}.log",
            f"--identity={identity}",
            f"--lease-seconds={self.args.lease_seconds}",
            "--health-port=0",
            "--metrics-port=0",
            "--dashboard-port=0",
        )

    def holder(self) -> str | None:
        try:
            lease = self.leases.read_namespaced_lease(LEASE, "sluice-system")
        except Exception:  # noqa: BLE001 - not created yet
            return None
        return lease.spec.holder_identity if lease.spec else None

    def probe(self, name: str) -> None:
        template = kwok.pod_template({"cpu": "10m"})
        body = kwok.job(name, template, namespace=NAMESPACE, queue="probes", pods=1, suspend=True)
        self.batch.create_namespaced_job(NAMESPACE, body)

    def admitted(self, name: str) -> bool:
        raw = self.batch.read_namespaced_job(name, NAMESPACE, _preload_content=False)
        return json.loads(raw.data)["spec"].get("suspend") is False

    def wait(self, name: str, timeout: float) -> float:
        started = time.monotonic()
        while not self.admitted(name):
            if time.monotonic() - started > timeout:
                raise SystemExit(f"{name} not admitted within {timeout:.0f} s")
            time.sleep(0.05)
        return time.monotonic()

    def run(self) -> int:
        args = self.args
        for ns in ("sluice-system", NAMESPACE):
            self.core.create_namespace({"metadata": {"name": ns}})
        self.core.create_node(kwok.fake_node("probe-node", {"cpu": "32", "pods": "110"}))
        self.objects.create_cluster_custom_object(
            GROUP,
            VERSION,
            "queues",
            {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue",
             "metadata": {"name": "probes"}, "spec": {"parent": "root"}},
        )  # fmt: skip
        for identity in ("replica-a", "replica-b"):
            self.start(identity)
        try:
            self.probe("warm-up")
            self.wait("warm-up", timeout=120)
            takeovers: list[float] = []
            for kill in range(args.kills):
                holder = self.holder()
                if holder not in self.replicas:
                    raise SystemExit(f"the Lease is held by {holder!r}, not by a replica")
                time.sleep(1.0)  # let the holder settle into its renewal rhythm
                victim = self.replicas.pop(holder)
                killed = time.monotonic()
                victim.send_signal(signal.SIGKILL)
                victim.wait(10)
                self.probe(f"after-kill-{kill}")
                acted = self.wait(f"after-kill-{kill}", timeout=args.lease_seconds * 4 + 30)
                takeovers.append(acted - killed)
                _progress(
                    f"kill {kill + 1}: {holder} killed; the next leader admitted"
                    f" {takeovers[-1]:.1f} s later"
                )
                self.start(holder)  # two replicas again
        finally:
            for process in self.replicas.values():
                process.terminate()
            for process in self.replicas.values():
                process.wait(30)
        lease = float(args.lease_seconds)
        median, worst = statistics.median(takeovers), max(takeovers)
        print(f"\nfailover: {args.kills} kills (SIGKILL) of the leader of two replicas")
        print(f"{'measure':<48} {'sluice':>8} {'floor':>8} {'ratio':>7}")
        print("-" * 74)
        print(f"{'kill to the next leader first write, median (s)':<48}"
              f" {median:>8.1f} {lease:>8.1f} {median / lease:>7.2f}")  # fmt: skip
        print(f"{'kill to the next leader first write, slowest (s)':<48}"
              f" {worst:>8.1f} {lease:>8.1f} {worst / lease:>7.2f}")  # fmt: skip
        print("(floor: the Lease duration; no replica may write before a dead holder's expires)")
        met = worst <= lease + 1
        print(f"\ntarget: every takeover <= Lease + 1 s: {'met' if met else 'NOT met'}")
        return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--lease-seconds", type=int, default=6)
    args = parser.parse_args()
    with living_cluster() as (cluster, api, state):
        return Failover(args, cluster, api, state).run()


if __name__ == "__main__":
    sys.exit(main())
