"""Plain pods: a burst of pod groups through the operator on the living local cluster, and the
webhooks' throughput on Pod reviews.

1. Burst: ``--nodes`` fake nodes, the operator as a process, then ``--groups`` groups of
   ``--size`` plain pods each (sluice.dev/pod-group, sluice.dev/pod-group-total-count) over
   ``--queues`` queues, created behind sluice's scheduling gate and labelled with their queue
   as the mutating webhook makes them, as fast as the API server takes them. Each queue's
   capability holds 3 of its groups, so some wait with a reason. Measured: the time from the
   last create until every pod of every admitted group is Running (sluice removes the gates,
   kube-scheduler binds the pods, KWOK runs them), and the operator's API writes per pod it
   admitted. Floor: with the operator stopped, as many of the same pods as were admitted,
   created without a gate in a fresh namespace: the time the cluster itself needs to run
   them after the last create.
2. Webhooks: Pod reviews (/mutate/pods then /validate/pods, a Deployment's pod of a queue)
   against the real server, beside a bare aiohttp server that only parses each review and
   allows it, in the same run (bench/bench_webhooks.py).

Targets: every admitted pod Running within twice the floor's time; the webhooks at least half
the floor's reviews/s.

Run: ``.venv/bin/python -m bench.bench_pods [--groups 250] [--size 4] [--queues 50]
[--nodes 100] [--requests 20000] [--connections 8]``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import sys
import time
from pathlib import Path
from typing import Any

from bench import bench_webhooks
from bench.bench_operator import Bench, PodWatch, _discard
from bench.living import living_cluster

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "hack"))

import devenv  # noqa: E402
from controlplane import kwok  # noqa: E402

GROUP, VERSION = "scheduling.sluice.dev", "v1beta1"
POD = {"cpu": "1", "memory": "1Gi"}
ADMITTED_PER_QUEUE = 3
"""Groups each queue's capability holds; the rest of its groups wait."""


def _progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


class PodBurst:
    def __init__(self, args: Any, cluster: Any, client: Any, api: Any) -> None:
        self.args = args
        self.cluster = cluster
        self.base = Bench(args, cluster, client, api)  # its fake nodes and metrics
        self.core = self.base.core
        self.objects = self.base.objects

    def pod(self, i: int, namespace: str, gated: bool) -> dict[str, Any]:
        size, queues = self.args.size, self.args.queues
        group = i // size
        template = kwok.pod_template(POD, restart_policy="Always")
        meta: dict[str, Any] = {"name": f"g{group:04d}-{i % size}", "namespace": namespace}
        if gated:
            meta["labels"] = {
                "sluice.dev/queue-name": f"q{group % queues:03d}",
                "sluice.dev/pod-group": f"g{group:04d}",
            }
            meta["annotations"] = {"sluice.dev/pod-group-total-count": str(size)}
            template["spec"]["schedulingGates"] = [{"name": "sluice.dev/admission"}]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]}

    def create_pods(self, namespace: str, count: int, gated: bool) -> tuple[float, float]:
        def create(i: int) -> None:
            body = self.pod(i, namespace, gated)
            _discard(self.core.create_namespaced_pod(namespace, body, _preload_content=False))

        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(create, range(count)))
        return started, time.monotonic()

    def pod_queues(self) -> None:
        held = self.args.size * ADMITTED_PER_QUEUE  # POD is 1 cpu and 1Gi
        capability = {"cpu": str(held), "memory": f"{held}Gi"}
        for q in range(self.args.queues):
            body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue",
                    "metadata": {"name": f"q{q:03d}"},
                    "spec": {"parent": "root", "capability": capability}}  # fmt: skip
            self.objects.create_cluster_custom_object(GROUP, VERSION, "queues", body)

    def burst(self, state: Path) -> dict[str, float]:
        args = self.args
        total = args.groups * args.size
        per_queue = -(-args.groups // args.queues)
        admitted_groups = sum(
            min(ADMITTED_PER_QUEUE, len(range(q, args.groups, args.queues)))
            for q in range(args.queues)
        )
        admitted = admitted_groups * args.size
        self.pod_queues()
        operator = devenv.start_operator(
            self.cluster.kubeconfig, state / "operator.log", "--health-port=0",
            f"--metrics-port={self.base.metrics_port}", "--dashboard-port=0",
        )  # fmt: skip
        try:
            time.sleep(3)  # the operator's first list and cycle
            watch = PodWatch(self.core, "bench")
            writes_before = self.base.operator_counters()[0]
            _progress(
                f"burst: {args.groups} groups of {args.size} pods over {args.queues} queues"
                f" (~{per_queue} groups each, {ADMITTED_PER_QUEUE} admitted): {admitted} pods"
                " to run"
            )
            started, last = self.create_pods("bench", total, gated=True)
            reached = watch.wait(admitted, timeout=600)
            watch.stop()
            if reached is None:
                raise SystemExit(f"not all {admitted} admitted pods Running within 600 s")
            time.sleep(2)  # the reasons of the waiting groups, written after the admissions
            writes = self.base.operator_counters()[0] - writes_before
        finally:
            operator.terminate()
            operator.wait(30)
        return {
            "admitted": admitted,
            "creating": last - started,
            "running": reached - last,
            "writes": writes,
        }

    def floor(self, count: int) -> dict[str, float]:
        watch = PodWatch(self.core, "floor")
        _progress(f"floor: {count} of the same pods, ungated, no sluice")
        started, last = self.create_pods("floor", count, gated=False)
        reached = watch.wait(count, timeout=600)
        watch.stop()
        if reached is None:
            raise SystemExit(f"not all {count} floor pods Running within 600 s")
        return {"creating": last - started, "running": reached - last}

    def run(self, state: Path) -> int:
        for ns in ("sluice-system", "bench", "floor"):
            self.core.create_namespace({"metadata": {"name": ns}})
        self.base.nodes()
        burst = self.burst(state)
        floor = self.floor(int(burst["admitted"]))
        print(
            f"[bench] plain pods: {self.args.groups} groups of {self.args.size} over"
            f" {self.args.queues} queues on {self.args.nodes} fake nodes",
            file=sys.stderr,
        )
        print(f"{'measure':<58} {'sluice':>8} {'floor':>8} {'ratio':>7}")
        print("-" * 84)
        ratio = burst["running"] / floor["running"]
        print(
            f"{'every admitted pod Running after the last create (s)':<58}"
            f" {burst['running']:>8.1f} {floor['running']:>8.1f} {ratio:>6.1f}x"
        )
        print(f"{'creating the pods (s)':<58} {burst['creating']:>8.1f} {floor['creating']:>8.1f}")
        print(
            f"{'pods admitted / operator API writes per admitted pod':<58}"
            f" {int(burst['admitted']):>8} {burst['writes'] / burst['admitted']:>8.2f}"
        )
        print("(floor: as many of the same pods, created without the gate, no sluice)")
        met = burst["running"] <= 2 * floor["running"]
        verdict = "met" if met else "NOT met"
        print(f"\ntarget: every admitted pod Running within 2x the floor: {verdict}")
        return 0


def webhooks(requests: int, connections: int) -> None:
    print(
        f"[bench] webhooks: {requests:,} Pod reviews over {connections} keep-alive HTTPS"
        " connections",
        file=sys.stderr,
    )
    hey = bench_webhooks.hey()
    r = bench_webhooks.run(requests, connections, kind="pods", binary=hey)
    floor = bench_webhooks.run(
        requests, connections, bench_webhooks._bare_server, kind="pods", binary=hey
    )
    print("\nserver  reviews  conns |  reviews/s   p50 ms   p99 ms  errors")
    print("-" * 64)
    for label, row in (("sluice", r), ("floor", floor)):
        print(
            f"{label:<6} {int(row['requests']):>8,} {connections:>6} | {row['rps']:>10,.0f}"
            f" {row['p50']:>8.2f} {row['p99']:>8.2f} {int(row['errors']):>7}"
        )
    ratio = r["rps"] / floor["rps"]
    print(f"\nsluice / floor: {ratio:.2f}x the throughput on Pod reviews")
    met = ratio >= 0.5 and r["errors"] == 0
    print(f"target: at least half the floor's reviews/s, 0 errors: {'met' if met else 'NOT met'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=250)
    parser.add_argument("--size", type=int, default=4, help="pods per group")
    parser.add_argument("--queues", type=int, default=50)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--connections", type=int, default=8)
    args = parser.parse_args()
    from kubernetes import client

    with living_cluster() as (cluster, api, state):
        PodBurst(args, cluster, client, api).run(state)
    webhooks(args.requests, args.connections)
    return 0


if __name__ == "__main__":
    sys.exit(main())
