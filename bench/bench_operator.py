"""Operator scale run on the local control plane: a burst of Jobs across many queues.

Starts its own control plane (hack/controlplane), the operator as a process, then creates
``--jobs`` Jobs across ``--queues`` queues as fast as the API server takes them. Reports how
long after the last create every job was decided (admitted, or pending with a reason), how
long until every Queue status matched the jobs, and the operator's API writes per decision.
Then it finishes as many admitted jobs as wait (through the status subresource) and reports
how fast, and at how many writes per decision, the backlog is admitted.
Targets: every job decided within 10 s of the last create; statuses within 2 s after that.

Run: ``.venv/bin/python -m bench.bench_operator [--jobs 1000] [--queues 50]``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import re
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "hack"))

import controlplane  # noqa: E402
import devenv  # noqa: E402


def _progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--queues", type=int, default=50)
    args = parser.parse_args()
    from kubernetes import client

    from sluice.kube import api_client

    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        plane = controlplane.ControlPlane(state, tie_to_parent=True, data_root=state)
        _progress("starting the control plane")
        cluster = plane.up()
        try:
            controlplane.install_crds(cluster, REPO / "crds")
            api = api_client(str(cluster.kubeconfig))
            core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
            objects = client.CustomObjectsApi(api)
            for ns in ("sluice-system", "bench"):
                core.create_namespace({"metadata": {"name": ns}})
            metrics_port = devenv.free_port()
            operator = devenv.start_operator(
                cluster.kubeconfig,
                state / "operator.log",
                "--health-port=0",
                f"--metrics-port={metrics_port}",
            )
            try:
                return _run(args, api, core, batch, objects, metrics_port)
            finally:
                operator.terminate()
                operator.wait(20)
        finally:
            plane.down()


def _run(args: Any, api: Any, core: Any, batch: Any, objects: Any, metrics_port: int) -> int:
    group, version = "scheduling.sluice.dev", "v1beta1"
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bench-node"}}
    core.create_node(node)
    core.patch_node_status(
        "bench-node",
        {
            "status": {
                "allocatable": {"cpu": "2000", "memory": "8Ti"},
                "capacity": {"cpu": "2000"},
                "conditions": [{"type": "Ready", "status": "True"}],
            }
        },
    )
    for q in range(args.queues):
        objects.create_cluster_custom_object(
            group,
            version,
            "queues",
            {
                "apiVersion": f"{group}/{version}",
                "kind": "Queue",
                "metadata": {"name": f"q{q:03d}"},
                "spec": {"parent": "root", "capability": {"cpu": "16"}},
            },
        )
    time.sleep(2)

    def create(i: int) -> None:
        batch.create_namespaced_job(
            "bench",
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": f"job-{i:05d}",
                    "labels": {"sluice.dev/queue-name": f"q{i % args.queues:03d}"},
                },
                "spec": {
                    "suspend": True,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": "1"}},
                                }
                            ],
                        }
                    },
                },
            },
        )

    _progress(f"creating {args.jobs} jobs across {args.queues} queues")
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(args.jobs)))
    last_create = time.monotonic()
    _progress(f"created in {last_create - started:.1f}s; waiting for decisions")

    def list_jobs() -> list[dict[str, Any]]:
        # Raw JSON: building client models for 1,000 Jobs ten times a second would cost the
        # shared CPU more than the operator under test uses.
        raw = batch.list_namespaced_job("bench", _preload_content=False)
        return list(json.loads(raw.data)["items"])

    def decided() -> tuple[int, int]:
        jobs = list_jobs()
        admitted = sum(1 for j in jobs if j["spec"].get("suspend") is False)
        explained = sum(
            1
            for j in jobs
            if j["spec"].get("suspend")
            and (j["metadata"].get("annotations") or {}).get("sluice.dev/pending-reason")
        )
        return admitted, explained

    deadline = last_create + 120
    admitted = explained = 0
    while time.monotonic() < deadline:
        admitted, explained = decided()
        if admitted + explained == args.jobs:
            break
        time.sleep(0.2)
    all_decided = time.monotonic()

    def statuses_match() -> bool:
        counts: dict[str, list[int]] = {}
        for j in list_jobs():
            q = j["metadata"]["labels"]["sluice.dev/queue-name"]
            slot = counts.setdefault(q, [0, 0])
            slot[0 if j["spec"].get("suspend") else 1] += 1
        for q, (pending, admitted_q) in counts.items():
            st = objects.get_cluster_custom_object(group, version, "queues", q).get("status") or {}
            if (
                st.get("pending") != pending
                or st.get("inqueue", 0) + st.get("running", 0) != admitted_q
            ):
                return False
        return True

    while time.monotonic() < all_decided + 30 and not statuses_match():
        time.sleep(0.1)
    statuses_done = time.monotonic()

    def counters() -> tuple[float, float]:
        text = (
            urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5)
            .read()
            .decode()
        )
        writes = sum(
            float(v) for v in re.findall(r"^sluice_api_writes_total\{[^}]*\} (\S+)$", text, re.M)
        )
        decisions = sum(
            float(v) for v in re.findall(r"^sluice_decisions_total\{[^}]*\} (\S+)$", text, re.M)
        )
        return writes, decisions

    writes, decisions = counters()
    print(" jobs queues | created in  decided after last create  statuses after  writes/decision")
    print("-" * 88)
    print(
        f"{args.jobs:>5} {args.queues:>6} | {last_create - started:>9.1f}s"
        f" {all_decided - last_create:>24.1f}s {statuses_done - all_decided:>14.1f}s"
        f" {writes / max(decisions, 1):>16.2f}"
    )
    print(
        f"\nadmitted {admitted}, pending with a reason {explained};"
        f" decisions {decisions:.0f}, API writes {writes:.0f}"
    )
    ok = (
        admitted + explained == args.jobs
        and all_decided - last_create <= 10
        and statuses_done - all_decided <= 2
    )
    print(
        "target: all decided <= 10 s after the last create, statuses <= 2 s after:"
        f" {'met' if ok else 'NOT met'}"
    )
    _drain_backlog(list_jobs, batch, explained, counters)
    return 0


def _drain_backlog(
    list_jobs: Callable[[], list[dict[str, Any]]],
    batch: Any,
    backlog: int,
    counters: Callable[[], tuple[float, float]],
) -> None:
    """Steady state: finish as many admitted jobs as wait, and count what it costs to admit
    the backlog (every admission moves the jobs queued behind it up one position)."""
    if not backlog:
        return
    writes_before, decisions_before = counters()
    running = [j for j in list_jobs() if j["spec"].get("suspend") is False][:backlog]
    now = "2026-01-01T00:00:00Z"
    status = {
        "status": {
            "startTime": now,
            "completionTime": now,
            "succeeded": 1,
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now},
                {"type": "Complete", "status": "True", "lastTransitionTime": now},
            ],
        }
    }
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda j: batch.patch_namespaced_job_status(
                    j["metadata"]["name"], "bench", status, _preload_content=False
                ).release_conn(),
                running,
            )
        )
    finished = time.monotonic()
    while time.monotonic() < finished + 60:
        if not [j for j in list_jobs() if j["spec"].get("suspend")]:
            break
        time.sleep(0.2)
    drained = time.monotonic()
    writes, decisions = counters()
    admitted = decisions - decisions_before
    print(
        f"\nbacklog: {len(running)} jobs finished in {finished - started:.1f}s, the {backlog}"
        f" waiting admitted {drained - finished:.1f}s after the last;"
        f" {(writes - writes_before) / max(admitted, 1):.2f} API writes per decision"
    )


if __name__ == "__main__":
    sys.exit(main())
