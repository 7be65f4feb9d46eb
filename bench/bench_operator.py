"""Operator scale run on the living local cluster: a burst of multi-pod Jobs across many queues.

Starts its own cluster (hack/controlplane: API server, controller manager, kube-scheduler and
KWOK), ``--nodes`` fake nodes and the operator as a process, then creates ``--jobs`` Jobs of
``--pods`` pods each across ``--queues`` queues as fast as the API server takes them.

1. Burst: how long after the last create the last job was admitted (seen by polling every
   0.2 s) and every job was decided (admitted, or pending with a reason), how long until
   every Queue status matched the jobs, and how long until every pod of every admitted job
   was Running (created by the Job controller, bound by kube-scheduler, run by KWOK);
   admitted jobs per second; the operator's API writes per admission.
2. Backlog: the first wave's pods are told to exit (KWOK ends them; the Job controller
   completes the Jobs), and the waiting jobs are admitted: how fast, and at how many writes
   per decision; and how long after the Job controller completed them every Queue's status
   counted them completed (the status lag), beside the full pass's period
   (``--full-pass-seconds``): the decision pass writes the statuses, so the lag is not
   bound to that period.
3. Floor: with the operator stopped, the same number of the same Jobs as were admitted, created
   unsuspended in a fresh namespace: the time the cluster itself needs to run them, its jobs
   per second and its own API writes per job. Each burst figure is printed beside it.

Targets: every job decided within 10 s of the last create; statuses within 2 s after that;
every admitted pod Running within twice the floor's time.

Run: ``.venv/bin/python -m bench.bench_operator [--jobs 1000] [--queues 50] [--nodes 100]
[--pods 4]``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import re
import ssl
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import urllib3

from bench.living import living_cluster

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "hack"))

import devenv  # noqa: E402
from controlplane import kwok  # noqa: E402

GROUP, VERSION = "scheduling.sluice.dev", "v1beta1"
NODE = {"cpu": "32", "memory": "128Gi", "pods": "110"}
POD = {"cpu": "1", "memory": "1Gi"}
# Each queue may hold half its jobs: half the burst is admitted, half waits with a reason.
JOBS_PER_QUEUE_ADMITTED_FRACTION = 0.5


def _progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


class PodWatch:
    """Counts the Running pods of some jobs in a namespace from a watch (listing thousands of
    pods over and over would cost the shared CPU more than the cluster under test), and
    remembers when each count was first reached."""

    def __init__(self, core: Any, namespace: str, jobs: set[str] | None = None) -> None:
        """jobs: count only these Jobs' pods (None: every pod)."""
        self._core = core
        self._namespace = namespace
        self._jobs = jobs
        self._running: set[str] = set()
        self._reached: dict[int, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        version = ""
        while not self._stop.is_set():
            self._response = self._core.list_namespaced_pod(
                self._namespace,
                watch=True,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=30,
                _preload_content=False,
            )
            try:
                version = self._follow(self._response, version)
            except (urllib3.exceptions.HTTPError, OSError, ValueError):
                # The connection shut by stop(), or dropped: watch again.
                if self._stop.is_set():
                    return

    def _follow(self, response: Any, version: str) -> str:
        for line in response:
            event = json.loads(line)
            pod = event["object"]
            if event["type"] == "ERROR":  # too old a version: list again from scratch
                with self._lock:
                    self._running.clear()
                return ""
            version = pod["metadata"].get("resourceVersion", version)
            job = pod["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name")
            if event["type"] == "BOOKMARK" or (self._jobs is not None and job not in self._jobs):
                continue
            running = (
                event["type"] != "DELETED"
                and pod.get("status", {}).get("phase") == "Running"
                and not pod["metadata"].get("deletionTimestamp")
            )
            with self._lock:
                (self._running.add if running else self._running.discard)(pod["metadata"]["name"])
                self._reached.setdefault(len(self._running), time.monotonic())
        return version

    def wait(self, count: int, timeout: float) -> float | None:
        """When `count` pods were first Running at once (None if not within timeout)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                reached = [t for n, t in self._reached.items() if n >= count]
            if reached:
                return min(reached)
            time.sleep(0.2)
        return None

    def stop(self) -> None:
        self._stop.set()
        if self._response is not None:
            self._response.shutdown()
        self._thread.join(5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--queues", type=int, default=50)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--pods", type=int, default=4, help="pods per job")
    parser.add_argument(
        "--full-pass-seconds", type=float, default=5.0, help="the operator's full-pass period"
    )
    args = parser.parse_args()
    from kubernetes import client

    with living_cluster() as (cluster, api, state):
        return Bench(args, cluster, client, api).run(state)


class Bench:
    def __init__(self, args: Any, cluster: Any, client: Any, api: Any) -> None:
        self.args = args
        self.cluster = cluster
        self.core = client.CoreV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.objects = client.CustomObjectsApi(api)
        self.metrics_port = devenv.free_port()

    # -- the cluster ------------------------------------------------------------------------

    def nodes(self) -> None:
        _progress(f"creating {self.args.nodes} fake nodes of {NODE}")
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda i: _discard(
                        self.core.create_node(
                            kwok.fake_node(f"node-{i:03d}", NODE), _preload_content=False
                        )
                    ),
                    range(self.args.nodes),
                )
            )

        def schedulable() -> int:
            raw = self.core.list_node(_preload_content=False)
            return sum(
                1
                for n in json.loads(raw.data)["items"]
                if not n["spec"].get("taints")
                and any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in n["status"].get("conditions") or []
                )
            )

        deadline = time.monotonic() + 120
        while schedulable() < self.args.nodes:
            if time.monotonic() > deadline:
                raise SystemExit("fake nodes not Ready and untainted within 120 s")
            time.sleep(0.5)

    def api_writes(self) -> float:
        """Every create, update, patch and delete the API server has served so far."""
        context = ssl.create_default_context(cafile=str(self.cluster.ca_cert))
        pki = self.cluster.state_dir / "pki"
        context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        with urllib.request.urlopen(
            f"{self.cluster.server}/metrics", context=context, timeout=10
        ) as response:
            text = response.read().decode()
        pattern = r'^apiserver_request_total\{[^}]*verb="(?:POST|PUT|PATCH|DELETE)"[^}]*\} (\S+)$'
        return sum(float(v) for v in re.findall(pattern, text, re.M))

    def operator_counters(self) -> tuple[float, float]:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        text = urllib.request.urlopen(url, timeout=5).read().decode()
        writes = sum(
            float(v) for v in re.findall(r"^sluice_api_writes_total\{[^}]*\} (\S+)$", text, re.M)
        )
        decisions = sum(
            float(v) for v in re.findall(r"^sluice_decisions_total\{[^}]*\} (\S+)$", text, re.M)
        )
        return writes, decisions

    def job(self, i: int, namespace: str, queue: str | None) -> dict[str, Any]:
        template = kwok.pod_template(POD)
        return kwok.job(
            f"job-{i:05d}",
            template,
            namespace=namespace,
            queue=queue,
            pods=self.args.pods,
            suspend=True if queue else None,
        )

    def create_jobs(self, namespace: str, count: int, queued: bool) -> tuple[float, float]:
        """Create `count` Jobs, 8 at a time; return when the first and the last went in."""

        def create(i: int) -> None:
            queue = f"q{i % self.args.queues:03d}" if queued else None
            _discard(
                self.batch.create_namespaced_job(
                    namespace, self.job(i, namespace, queue), _preload_content=False
                )
            )

        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(create, range(count)))
        return started, time.monotonic()

    def list_jobs(self, namespace: str) -> list[dict[str, Any]]:
        # Raw JSON: building client models for 1,000 Jobs ten times a second would cost the
        # shared CPU more than the operator under test uses.
        raw = self.batch.list_namespaced_job(namespace, _preload_content=False)
        return list(json.loads(raw.data)["items"])

    # -- the run ----------------------------------------------------------------------------

    def run(self, state: Path) -> int:
        args = self.args
        for ns in ("sluice-system", "bench", "floor"):
            self.core.create_namespace({"metadata": {"name": ns}})
        self.nodes()
        per_queue = args.jobs / args.queues
        capability = max(1, int(per_queue * JOBS_PER_QUEUE_ADMITTED_FRACTION)) * args.pods
        for q in range(args.queues):
            self.objects.create_cluster_custom_object(
                GROUP,
                VERSION,
                "queues",
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "Queue",
                    "metadata": {"name": f"q{q:03d}"},
                    "spec": {"parent": "root", "capability": {"cpu": str(capability)}},
                },
            )
        operator = devenv.start_operator(
            self.cluster.kubeconfig,
            state / "operator.log",
            "--health-port=0",
            f"--metrics-port={self.metrics_port}",
            "--dashboard-port=0",
            f"--full-pass-seconds={args.full_pass_seconds}",
        )
        try:
            time.sleep(2)
            burst = self.burst()
            backlog = self.drain(burst["explained"])
        finally:
            operator.terminate()
            operator.wait(20)
        floor = self.floor(burst["admitted"])
        self.report(burst, floor)
        print(backlog)
        return 0

    def burst(self) -> dict[str, Any]:
        args = self.args
        watch = PodWatch(self.core, "bench")
        writes_before = self.api_writes()
        _progress(
            f"creating {args.jobs} jobs of {args.pods} pods across {args.queues} queues"
            f" on {args.nodes} nodes"
        )
        started, last_create = self.create_jobs("bench", args.jobs, queued=True)
        _progress(f"created in {last_create - started:.1f}s; waiting for decisions")

        def decided() -> tuple[int, int]:
            jobs = self.list_jobs("bench")
            admitted = sum(1 for j in jobs if j["spec"].get("suspend") is False)
            explained = sum(
                1
                for j in jobs
                if j["spec"].get("suspend")
                and (j["metadata"].get("annotations") or {}).get("sluice.dev/pending-reason")
            )
            return admitted, explained

        admitted = explained = 0
        last_admission = last_create
        while time.monotonic() < last_create + 120:
            seen, explained = decided()
            if seen != admitted:
                admitted, last_admission = seen, time.monotonic()
            if admitted + explained == args.jobs:
                break
            time.sleep(0.2)
        all_decided = time.monotonic()

        def statuses_match() -> bool:
            counts: dict[str, list[int]] = {}
            for j in self.list_jobs("bench"):
                q = j["metadata"]["labels"]["sluice.dev/queue-name"]
                slot = counts.setdefault(q, [0, 0])
                slot[0 if j["spec"].get("suspend") else 1] += 1
            for q, (pending, admitted_q) in counts.items():
                st = self.objects.get_cluster_custom_object(GROUP, VERSION, "queues", q)
                st = st.get("status") or {}
                if (
                    st.get("pending") != pending
                    or st.get("inqueue", 0) + st.get("running", 0) != admitted_q
                ):
                    return False
            return True

        while time.monotonic() < all_decided + 30 and not statuses_match():
            time.sleep(0.1)
        statuses_done = time.monotonic()
        _progress(f"{admitted} admitted; waiting for their {admitted * args.pods} pods to run")
        all_running = watch.wait(admitted * args.pods, timeout=300)
        watch.stop()
        writes, decisions = self.operator_counters()
        return {
            "started": started,
            "last_create": last_create,
            "last_admission": last_admission,
            "all_decided": all_decided,
            "statuses_done": statuses_done,
            "all_running": all_running,
            "admitted": admitted,
            "explained": explained,
            "operator_writes": writes,
            "decisions": decisions,
            "api_writes": self.api_writes() - writes_before,
        }

    def drain(self, backlog: int) -> str:
        """Steady state: the first wave's pods exit (KWOK ends each pod told so; the Job
        controller completes its Job), and the backlog is admitted (every admission moves the
        jobs queued behind it up one position)."""
        if not backlog:
            return "\nbacklog: none (every job was admitted at once)"
        jobs = self.list_jobs("bench")
        waiting = {j["metadata"]["name"] for j in jobs if j["spec"].get("suspend")}
        watch = PodWatch(self.core, "bench", waiting)
        writes_before, decisions_before = self.operator_counters()
        finishing = [j for j in jobs if j["spec"].get("suspend") is False][:backlog]
        names = {j["metadata"]["name"] for j in finishing}
        raw = self.core.list_namespaced_pod("bench", _preload_content=False)
        pods = [
            p["metadata"]["name"]
            for p in json.loads(raw.data)["items"]
            if p["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name") in names
        ]
        exit_now = {"metadata": {"annotations": {kwok.COMPLETE_AFTER: "0s"}}}
        _progress(f"ending the {len(pods)} pods of {len(finishing)} admitted jobs")
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda name: _discard(
                        self.core.patch_namespaced_pod(
                            name, "bench", exit_now, _preload_content=False
                        )
                    ),
                    pods,
                )
            )
        told = time.monotonic()
        completed: float | None = None
        drained: float | None = None
        shown: float | None = None
        while time.monotonic() < told + 180 and (drained is None or shown is None):
            jobs = self.list_jobs("bench")
            if completed is None and all(
                _complete(j) for j in jobs if j["metadata"]["name"] in names
            ):
                completed = time.monotonic()
            if shown is None and self.completions_shown(jobs):
                shown = time.monotonic()
            if drained is None and not [j for j in jobs if j["spec"].get("suspend")]:
                drained = time.monotonic()
            time.sleep(0.1)
        all_running = watch.wait(len(waiting) * self.args.pods, timeout=120)
        watch.stop()
        writes, decisions = self.operator_counters()
        admitted = decisions - decisions_before

        def since(t: float | None) -> str:
            return "-" if t is None else f"{t - told:.1f}s"

        return (
            f"\nbacklog: the {len(pods)} pods of {len(finishing)} admitted jobs told to exit in"
            f" {told - started:.1f}s; after the last: the Job controller had completed those jobs"
            f" {since(completed)}, the {backlog} waiting were admitted {since(drained)} and all"
            f" their pods Running {since(all_running)};"
            f" {(writes - writes_before) / max(admitted, 1):.2f} operator API writes per decision"
            f"\nstatus lag: every Queue's status counted the completed jobs"
            f" {_lag(completed, shown)} after the Job controller completed the last of them,"
            f" beside the full pass's period of {self.args.full_pass_seconds:g}s"
        )

    def completions_shown(self, jobs: list[dict[str, Any]]) -> bool:
        """Whether every Queue's status counts as many completed jobs as the Jobs say."""
        done: dict[str, int] = {}
        for j in jobs:
            q = j["metadata"]["labels"]["sluice.dev/queue-name"]
            done[q] = done.get(q, 0) + (1 if _complete(j) else 0)
        if not any(done.values()):
            return False
        for q, count in done.items():
            st = self.objects.get_cluster_custom_object(GROUP, VERSION, "queues", q)
            if (st.get("status") or {}).get("completed", 0) != count:
                return False
        return True

    def floor(self, count: int) -> dict[str, Any]:
        """The same Jobs, as many as sluice admitted, with no sluice: what the cluster needs."""
        _progress("clearing the burst's jobs for the floor run")
        self.core.delete_namespace("bench")
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            raw = self.core.list_pod_for_all_namespaces(_preload_content=False, limit=1)
            if not json.loads(raw.data)["items"]:
                break
            time.sleep(1)
        watch = PodWatch(self.core, "floor")
        writes_before = self.api_writes()
        _progress(f"floor: {count} jobs of {self.args.pods} pods, unsuspended, no sluice")
        started, last_create = self.create_jobs("floor", count, queued=False)
        all_running = watch.wait(count * self.args.pods, timeout=300)
        watch.stop()
        return {
            "started": started,
            "last_create": last_create,
            "all_running": all_running,
            "api_writes": self.api_writes() - writes_before,
        }

    def report(self, burst: dict[str, Any], floor: dict[str, Any]) -> None:
        args = self.args
        admitted = burst["admitted"]
        print(f"\n{args.jobs} jobs x {args.pods} pods, {args.queues} queues, {args.nodes} nodes")
        print(
            f"created in {burst['last_create'] - burst['started']:.1f}s;"
            f" last admission {burst['last_admission'] - burst['last_create']:.1f}s and every job"
            f" decided {burst['all_decided'] - burst['last_create']:.1f}s after the last create"
            f" ({admitted} admitted, {burst['explained']} pending with a reason);"
            f" statuses {burst['statuses_done'] - burst['all_decided']:.1f}s after that"
        )

        def after(result: dict[str, Any]) -> float | None:
            t = result["all_running"]
            return None if t is None else float(t - result["last_create"])

        def rate(result: dict[str, Any]) -> float | None:
            t = result["all_running"]
            return None if t is None else admitted / max(t - result["started"], 1e-9)

        rows: list[tuple[str, float | None, float | None]] = [
            ("every admitted pod Running after the last create (s)", after(burst), after(floor)),
            ("jobs running per second, first create to last pod", rate(burst), rate(floor)),
            (
                "API writes per job, every client",
                burst["api_writes"] / max(admitted, 1),
                floor["api_writes"] / max(admitted, 1),
            ),
        ]
        print(f"\n{'':56} {'sluice':>9} {'floor':>9} {'ratio':>7}")
        for label, ours, theirs in rows:
            ratio = f"{ours / theirs:.2f}" if ours is not None and theirs else "-"
            print(f"{label:56} {_fmt(ours):>9} {_fmt(theirs):>9} {ratio:>7}")
        per_decision = burst["operator_writes"] / max(burst["decisions"], 1)
        operator_per_admission = burst["operator_writes"] / max(admitted, 1)
        cluster_per_job = floor["api_writes"] / max(admitted, 1)
        print(
            f"{'operator API writes per admission':56} {operator_per_admission:>9.2f}"
            f" {cluster_per_job:>9.2f} {operator_per_admission / max(cluster_per_job, 1e-9):>7.2f}"
            "   (floor: the cluster's own writes per job)"
        )
        print(
            f"operator API writes per decision (sluice_decisions_total):"
            f" {per_decision:.2f}; decisions {burst['decisions']:.0f},"
            f" writes {burst['operator_writes']:.0f}"
        )
        print(
            f"admitted jobs per second, first create to last decision:"
            f" {admitted / max(burst['all_decided'] - burst['started'], 1e-9):.0f}"
            f" (the API server took creates at"
            f" {args.jobs / max(burst['last_create'] - burst['started'], 1e-9):.0f}/s)"
        )
        running = after(burst)
        floor_running = after(floor)
        ok = (
            admitted + burst["explained"] == args.jobs
            and burst["all_decided"] - burst["last_create"] <= 10
            and burst["statuses_done"] - burst["all_decided"] <= 2
            and running is not None
            and floor_running is not None
            and running <= 2 * floor_running
        )
        print(
            "target: all decided <= 10 s after the last create, statuses <= 2 s after,"
            f" pods Running within 2x the floor: {'met' if ok else 'NOT met'}"
        )


def _complete(job: dict[str, Any]) -> bool:
    conditions = job.get("status", {}).get("conditions") or []
    return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)


def _discard(response: Any) -> None:
    """Read the unwanted answer to the end, so its connection can serve the next request."""
    response.drain_conn()
    response.release_conn()


def _lag(completed: float | None, shown: float | None) -> str:
    """How long after the completions (both seen by polling every 0.1 s) the statuses
    showed them; a status already showing them at the poll that saw them lags 0."""
    if completed is None or shown is None:
        return "-"
    return f"{max(shown - completed, 0.0):.1f}s"


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


if __name__ == "__main__":
    sys.exit(main())
