"""The operator at scale on the living local cluster: 1,000 queues and 40,000 stored jobs,
then single jobs created one by one.

The stored jobs ask for a resource no node offers, so all 40,000 wait (each with its pending
reason, written once) and every cycle carries them all. One fake node offers a resource of
its own; each single job asks for it in an empty queue and so is admitted at once. Measured:
how long the operator takes to give all stored jobs their reasons after it starts, then for
each single job the time from its create to its admission, beside the floor of the same
client creating a job and un-suspending it itself (the two writes the path needs, no
decision); the operator's decision pass (the decision pass, on every change) and its full pass
(every job's position and reason, in the background: how long it took and how many ran
while the singles were created); how far behind the watches run, read from the operator's
``sluice_watch_echo_seconds``: how long each of its own writes (a pending reason, an
admission, a Queue's status) took to come back to it on its watch, that is how long any event
then waits in the watch streams (and, for a Queue, in Kopf's queues) before the operator sees
it; the
event-loop lag beside it (``sluice_event_loop_lag_seconds``, how late a 0.1 s timer fires on
the loop that stores the events); both while the stored jobs are first explained and while
the singles run;
and the operator's resident memory once every stored job is explained, beside the memory a
bare ``json.loads`` of the same jobs as listed takes.

With ``--reclaim`` the singles need reclaim to be admitted: the special resource is offered
by one slot on each of 200 nodes in 8 blocks x 25 racks, all of them held by admitted jobs
of a queue that borrows them ("fillers"), and each single takes one back. ``--topology``
(which implies ``--reclaim``) adds a Topology of those blocks and racks, makes every other
stored job rack-required and every single too: each single then takes its filler back
inside one rack (docs/scheduler.md, *Reclaim and preempt by domain*). The figure to compare
is create to admission with ``--topology`` against the same run with ``--reclaim`` alone
(target: within 1.3x).

Run: ``.venv/bin/python -m bench.bench_operator_scale [--queues 1000] [--jobs 40000] [--singles
20] [--reclaim | --topology] [--without-controller-manager]``. The last is for hundreds of
thousands of jobs on one 24 GiB machine: the controller manager takes no part in the admissions
measured (every stored job stays suspended; a single is admitted when the operator un-suspends
it), and at 400,000 jobs it would hold about 6 GiB. (A Go memory limit, ``GOMEMLIMIT``, on the
API server was tried for the same end and left out: at 9 GiB, about what the API server holds
at 400,000 jobs, the second listing the operator's watches then made had not finished after 28
minutes and its continue token expired; without it, it took about 8 minutes.) Targets: median
create-to-admission <= 0.2 s at 1,000 queues / 40,000 jobs (<= 0.5 s at 10,000 queues / 400,000
jobs); watch echo p99 <= 1 s while the singles run.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import re
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
import urllib.request
from pathlib import Path
from typing import Any

from bench.living import living_cluster

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "hack"))

import devenv  # noqa: E402
from controlplane import kwok  # noqa: E402

GROUP, VERSION = "scheduling.sluice.dev", "v1beta1"
SPECIAL = "bench.sluice.dev/slot"
NOWHERE = "bench.sluice.dev/none"  # no node offers it: stored jobs all wait
NOT_READY = "node.kubernetes.io/not-ready"
TARGET_S = 0.2
LARGE_TARGET_S = 0.5  # from 100,000 jobs on
LAG_TARGET_S = 1.0
EXPLAINING_GAP_S = 10.0
"""While the stored jobs are first explained, one job is created every this many seconds."""
LIST_EVERY_S = 10.0
"""Once the operator says every reason is written, how often the stored jobs are listed."""
BLOCK, RACK = "example.com/block", "example.com/rack"
BLOCKS, RACKS_PER_BLOCK = 8, 25
RACK_REQUIRED = {"sluice.dev/topology-required": RACK}
TOPOLOGY_TARGET = 1.3
"""--topology: create to admission within this times the same run without topology."""


def _progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _discard(response: Any) -> None:
    response.read()
    response.release_conn()


class Scale:
    def __init__(self, args: Any, cluster: Any, api: Any) -> None:
        from kubernetes import client

        self.args = args
        self.cluster = cluster
        self.core = client.CoreV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.objects = client.CustomObjectsApi(api)
        self.metrics_port = devenv.free_port()
        # 60 min, or 25 ms a job beyond 144,000: at 400,000 jobs on two cores the reasons were
        # written at about 50 a second (about 130 at 100,000).
        self.explain_within = max(3600.0, args.jobs / 40)
        self.operator: subprocess.Popen[bytes] | None = None
        self.operator_log: Path | None = None

    def queues(self) -> list[str]:
        leaves = []
        depts = max(1, self.args.queues // 50)

        def create(name: str, spec: dict[str, Any]) -> None:
            body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue",
                    "metadata": {"name": name}, "spec": spec}  # fmt: skip
            self.objects.create_cluster_custom_object(GROUP, VERSION, "queues", body)

        for d in range(depts):
            create(f"dept-{d:02d}", {"parent": "root"})
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            names = [f"team-{t:04d}" for t in range(self.args.queues - depts - 1)]
            specs = [{"parent": f"dept-{t % depts:02d}", "capability": {NOWHERE: "20"}}
                     for t in range(len(names))]  # fmt: skip
            list(pool.map(create, names, specs))
            leaves = names
        create("singles", {"parent": "root"})
        if self.args.reclaim:
            create("fillers", {"parent": "root"})
        return leaves

    def lift_not_ready(self, node: str) -> None:
        """What the controller manager's node lifecycle controller would do: once KWOK reports
        the node Ready, take off the not-ready taint the API server put on it at create."""
        deadline = time.monotonic() + 60
        while True:
            found = self.core.read_node(node)
            ready = any(c.type == "Ready" and c.status == "True"
                        for c in found.status.conditions or ())  # fmt: skip
            if ready:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"node {node} not Ready within 60 s")
            time.sleep(0.2)
        kept = [t.to_dict() for t in found.spec.taints or () if t.key != NOT_READY]
        self.core.patch_node(node, {"spec": {"taints": kept or None}})

    def racks(self) -> None:
        """--reclaim: one slot of the special resource on each node of 8 blocks x 25 racks,
        and (--topology) the Topology of them; the fillers that hold every slot, stored
        suspended like the other jobs and admitted by the operator's first pass."""
        names = []
        for b in range(BLOCKS):
            for r in range(RACKS_PER_BLOCK):
                name, rack = f"rack-{b}-{r:02d}", f"r{b * RACKS_PER_BLOCK + r:03d}"
                labels = {BLOCK: f"b{b}", RACK: rack}
                self.core.create_node(kwok.fake_node(name, {SPECIAL: 1}, labels=labels))
                names.append(name)
        if self.args.without_controller_manager:
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                list(pool.map(self.lift_not_ready, names))
        if self.args.topology:
            levels = [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}]
            body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Topology",
                    "metadata": {"name": "racks"}, "spec": {"levels": levels}}  # fmt: skip
            self.objects.create_cluster_custom_object(GROUP, VERSION, "topologies", body)
        for i in range(len(names)):
            body = self.job(f"filler-{i:03d}", "fillers", "fillers", SPECIAL)
            _discard(self.batch.create_namespaced_job("fillers", body, _preload_content=False))

    def fillers_admitted(self) -> int:
        raw = self.batch.list_namespaced_job("fillers", _preload_content=False)
        return sum(1 for j in json.loads(raw.data)["items"] if j["spec"].get("suspend") is False)

    def job(
        self, name: str, namespace: str, queue: str, resource: str, racked: bool = False
    ) -> dict[str, Any]:
        template = kwok.pod_template({resource: 1}, annotations=RACK_REQUIRED if racked else None)
        # No webhooks here: a queued job is created suspended, as the mutating webhook would.
        return kwok.job(name, template, namespace=namespace, queue=queue, pods=1, suspend=True)

    def store(self, leaves: list[str]) -> float:
        def create(i: int) -> None:
            racked = self.args.topology and i % 2 == 1  # half the stored jobs rack-required
            body = self.job(f"stored-{i:05d}", "stored", leaves[i % len(leaves)], NOWHERE, racked)
            _discard(self.batch.create_namespaced_job("stored", body, _preload_content=False))

        started = time.monotonic()
        done = 0
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for _ in pool.map(create, range(self.args.jobs)):
                done += 1
                if done % 5000 == 0:
                    _progress(f"{done:,} of {self.args.jobs:,} jobs stored")
        return time.monotonic() - started

    def explained(self) -> int:
        token: str | None = None
        count = 0
        while True:
            raw = self.batch.list_namespaced_job(
                "stored", limit=5000, _continue=token, _preload_content=False
            )
            page = json.loads(raw.data)
            for job in page["items"]:
                if "sluice.dev/pending-reason" in (job["metadata"].get("annotations") or {}):
                    count += 1
            token = page["metadata"].get("continue")
            if not token:
                return count

    def parsed_mib(self) -> float:
        """The floor of the operator's memory: the stored jobs as the API server lists them,
        parsed by a bare ``json.loads`` (page by page; the bytes Python holds for each)."""
        token: str | None = None
        total = 0
        tracemalloc.start()
        try:
            while True:
                raw = self.batch.list_namespaced_job(
                    "stored", limit=5000, _continue=token, _preload_content=False
                )
                data = raw.data
                before = tracemalloc.get_traced_memory()[0]
                page = json.loads(data)
                total += tracemalloc.get_traced_memory()[0] - before
                token = page["metadata"].get("continue")
                del page
                if not token:
                    return total / 2**20
        finally:
            tracemalloc.stop()

    def admitted(self, name: str, namespace: str) -> bool:
        raw = self.batch.read_namespaced_job(name, namespace, _preload_content=False)
        return json.loads(raw.data)["spec"].get("suspend") is False

    def still_running(self) -> None:
        """Stop the benchmark, with the end of the operator's log, if the operator exited (no
        wait for a deadline that cannot be met)."""
        if self.operator is None or self.operator.poll() is None:
            return
        tail = self.operator_log.read_text(errors="replace")[-3000:] if self.operator_log else ""
        raise SystemExit(f"the operator exited ({self.operator.returncode}); its log ends:\n{tail}")

    def single(self, name: str, within: float = 60, since: float | None = None) -> float:
        """Create one job that fits, in the empty queue; the seconds from ``since`` (its
        create when None) until it is admitted."""
        body = self.job(name, "singles", "singles", SPECIAL, self.args.topology)
        started = time.monotonic() if since is None else since
        _discard(self.batch.create_namespaced_job("singles", body, _preload_content=False))
        while not self.admitted(name, "singles"):
            if time.monotonic() - started > within:
                raise SystemExit(f"{name} not admitted within {within:g} s")
            self.still_running()
            time.sleep(0.02)
        return time.monotonic() - started

    def while_explaining(self, started: float, done: threading.Event) -> dict[str, Any]:
        """From the operator's start until every stored job is explained: one job created at
        once (how soon a new leader at this size admits anything) and then one every
        ``EXPLAINING_GAP_S`` (what a tenant waits while the new leader explains)."""
        first = self.single("first", within=self.explain_within, since=started)
        _progress(f"the job created at the start admitted after {first:.1f} s")
        during: list[float] = []
        while not done.wait(EXPLAINING_GAP_S):
            name = f"during-{len(during):03d}"
            during.append(self.single(name, within=self.explain_within))
            _progress(f"while explaining: {name} admitted {during[-1]:.2f} s after its create")
        return {"first": first, "during": during}

    def reasons_written(self) -> float:
        """The pending reasons the operator says it has written (its metrics: cheap to read,
        unlike listing every stored job)."""
        found = re.search(r'^sluice_api_writes_total\{kind="reason"\} (\S+)$', self.metrics(), re.M)
        return float(found[1]) if found else 0.0

    def converge(self, started: float) -> float:
        """Seconds from the start until every stored job shows its pending reason: the
        operator's count of reasons written is watched until it reaches the stored jobs,
        then the jobs are listed (again every ``LIST_EVERY_S`` until all show one)."""
        while True:
            self.still_running()
            if time.monotonic() - started > self.explain_within:
                raise SystemExit(
                    f"the stored jobs not all explained after {self.explain_within / 60:.0f} min"
                )
            try:
                enough = self.reasons_written() >= self.args.jobs
            except OSError:  # the metrics server not up yet
                enough = False
            if enough and self.explained() >= self.args.jobs:
                return time.monotonic() - started
            time.sleep(LIST_EVERY_S if enough else 2)

    def floor(self, i: int) -> float:
        """The same client doing the two writes itself: create, then un-suspend."""
        body = self.job(f"floor-{i:02d}", "floor", "", SPECIAL)
        body["metadata"].pop("labels", None)
        body["spec"]["suspend"] = True
        started = time.monotonic()
        _discard(self.batch.create_namespaced_job("floor", body, _preload_content=False))
        _discard(
            self.batch.patch_namespaced_job(
                f"floor-{i:02d}", "floor", {"spec": {"suspend": False}}, _preload_content=False
            )
        )
        return time.monotonic() - started

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        return urllib.request.urlopen(url, timeout=10).read().decode()  # type: ignore[no-any-return]

    def lag(self) -> dict[str, dict[float, float]]:
        """The event-loop lag and the watch echo histograms: name -> upper bound ->
        observations at or under it."""
        text = self.metrics()
        return {
            name: {
                float(bound): float(count)
                for bound, count in re.findall(
                    rf'^sluice_{name}_seconds_bucket\{{le="([^"]+)"\}} (\S+)$', text, re.M
                )
            }
            for name in ("event_loop_lag", "watch_echo")
        }

    def seconds(self, histogram: str) -> tuple[float, float]:
        """The sum and count of one of the operator's duration histograms."""
        text = self.metrics()
        total = float(re.search(rf"^{histogram}_sum (\S+)$", text, re.M)[1])  # type: ignore[index]
        count = float(re.search(rf"^{histogram}_count (\S+)$", text, re.M)[1])  # type: ignore[index]
        return total, count

    def passes(self) -> dict[str, tuple[float, float]]:
        return {
            "decision": self.seconds("sluice_decision_duration_seconds"),
            "full": self.seconds("sluice_cycle_duration_seconds"),
        }

    def run(self, state: Path) -> int:
        args = self.args
        for ns in ("sluice-system", "stored", "singles", "floor", "fillers"):
            self.core.create_namespace({"metadata": {"name": ns}})
        _progress(f"creating {args.queues:,} queues")
        leaves = self.queues()
        if args.reclaim:
            self.racks()  # the singles take back slots the fillers hold
        else:
            self.core.create_node(kwok.fake_node("slots", {SPECIAL: 10_000}))
            if args.without_controller_manager:
                self.lift_not_ready("slots")
        _progress(f"storing {args.jobs:,} jobs across {len(leaves):,} leaf queues")
        stored = self.store(leaves)
        _progress(f"stored in {stored:.0f} s; starting the operator")
        # A 60 s Lease: on a shared two-core machine the new leader's relist of every stored
        # job can keep the API server from answering a renewal within the default 15 s.
        operator = devenv.start_operator(
            self.cluster.kubeconfig, state / "operator.log", "--health-port=0",
            f"--metrics-port={self.metrics_port}", "--dashboard-port=0", "--lease-seconds=60",
        )  # fmt: skip
        self.operator, self.operator_log = operator, state / "operator.log"
        started = time.monotonic()
        try:
            done = threading.Event()
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                early = pool.submit(self.while_explaining, started, done)
                try:
                    converged = self.converge(started)
                finally:
                    done.set()
                explaining = early.result()
            _progress(f"all {args.jobs:,} jobs explained {converged:.0f} s after the start")
            resident = _resident_mib(operator.pid)
            lag_start = self.lag()
            if args.reclaim:  # every slot held, by a filler or a single admitted so far
                taken = 1 + len(explaining["during"])
                while (admitted := self.fillers_admitted()) + taken < BLOCKS * RACKS_PER_BLOCK:
                    self.still_running()
                    _progress(f"{admitted} fillers admitted")
                    time.sleep(2)
            before = self.passes()
            began = time.monotonic()
            singles = []
            for i in range(args.singles):
                singles.append(self.single(f"single-{i:02d}"))
                time.sleep(0.5)
            window = time.monotonic() - began
            after = self.passes()
            # --reclaim: each single admitted took a filler's slot back (the check that it had to)
            fillers = self.fillers_admitted() if args.reclaim else 0
            lag_end = self.lag()
        finally:
            operator.terminate()
            operator.wait(30)
        floors = [self.floor(i) for i in range(args.singles)]
        parsed = self.parsed_mib()
        mean = {
            kind: (after[kind][0] - before[kind][0]) / max(after[kind][1] - before[kind][1], 1)
            for kind in after
        }
        full_runs = after["full"][1] - before["full"][1]
        target = TARGET_S if args.jobs < 100_000 else LARGE_TARGET_S
        median, floor = statistics.median(singles), statistics.median(floors)
        print(f"[bench] operator at scale: {args.queues:,} queues, {args.jobs:,} stored jobs",
              file=sys.stderr)  # fmt: skip
        if args.without_controller_manager:
            print("(cluster: kube-controller-manager not run)")
        if args.topology:
            print(f"(topology: {BLOCKS} blocks x {RACKS_PER_BLOCK} racks, half the stored jobs"
                  " and every single rack-required; each single reclaims a slot in one rack;"
                  f" compare with --reclaim, target within {TOPOLOGY_TARGET:g}x)")  # fmt: skip
        elif args.reclaim:
            print(f"(reclaim: {BLOCKS} blocks x {RACKS_PER_BLOCK} racks of one slot each, all"
                  " held by fillers; each single reclaims one; no Topology)")  # fmt: skip
        print(f"{'measure':<52} {'sluice':>8} {'floor':>8} {'ratio':>7}")
        print("-" * 78)
        print(f"{'create to admission, median of ' + str(args.singles) + ' singles (s)':<52}"
              f" {median:>8.2f} {floor:>8.3f} {median / floor:>6.0f}x")  # fmt: skip
        print(f"{'create to admission, slowest (s)':<52} {max(singles):>8.2f}")
        if args.reclaim:
            taken = BLOCKS * RACKS_PER_BLOCK - fillers
            admitted = args.singles + 1 + len(explaining["during"])
            print(f"{'fillers taken back (every single admitted by reclaim)':<52} {taken:>8}"
                  f"  (singles admitted: {admitted})")  # fmt: skip
        print(f"{'mean decision pass while the singles ran (s)':<52} {mean['decision']:>8.3f}")
        print(f"{'mean full pass while the singles ran (s)':<52} {mean['full']:>8.2f}")
        print(f"{'full passes while the singles ran':<52} {full_runs:>8.0f}"
              f"  (in {window:.0f} s: one every {window / max(full_runs, 1):.1f} s)")  # fmt: skip
        print(f"{'all stored jobs explained after the start (s)':<52} {converged:>8.0f}")
        during = explaining["during"] or [float("nan")]
        print(f"{'first job created at the start, admitted after (s)':<52}"
              f" {explaining['first']:>8.1f}")  # fmt: skip
        print(f"{'create to admission while explaining, median (s)':<52}"
              f" {statistics.median(during):>8.2f}  ({len(explaining['during'])} jobs,"
              f" one every {EXPLAINING_GAP_S:g} s)")  # fmt: skip
        print(f"{'create to admission while explaining, slowest (s)':<52} {max(during):>8.2f}")
        print(f"{'operator resident memory once all were explained (MiB)':<52}"
              f" {resident:>8.0f} {parsed:>8.0f} {resident / parsed:>6.1f}x")  # fmt: skip
        windows = (
            ("while explaining", lag_start, {}),
            ("while the singles ran", lag_end, lag_start),
        )
        for name, what, unit in (("event_loop_lag", "loop lag", "probes"),
                                 ("watch_echo", "watch echo", "writes")):  # fmt: skip
            for window, upto, since in windows:
                p99, worst, count = lag_bounds(upto[name], since.get(name, {}))
                print(f"{what + ' ' + window + ', p99 / worst (s)':<52}"
                      f" {_bound(p99):>8} {_bound(worst):>8}  ({count:,.0f} {unit})")  # fmt: skip
        print("(floor: the same client creating a job and un-suspending it itself)")
        print("(memory floor: the stored jobs as listed, parsed by a bare json.loads)")
        print("(loop lag: how late a 0.1 s timer on the operator's event loop fired; watch echo:")
        print(" how long each of the operator's own writes took to come back on its watch, how")
        print(" far behind the watches run; both as the upper bound of a histogram bucket)")
        met = median <= target
        print(
            f"\ntarget: median create to admission <= {target:g} s: {'met' if met else 'NOT met'}"
        )
        lag_met = lag_bounds(lag_end["watch_echo"], lag_start["watch_echo"])[0] <= LAG_TARGET_S
        print(f"target: watch echo p99 while the singles ran <= {LAG_TARGET_S:g} s: "
              f"{'met' if lag_met else 'NOT met'}")  # fmt: skip
        return 0


def _resident_mib(pid: int) -> float:
    """A process's resident memory (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmRSS for process {pid}")


def lag_bounds(upto: dict[float, float], since: dict[float, float]) -> tuple[float, float, float]:
    """The bucket bounds holding the 99th percentile and the worst of the observations made
    between two readings of the histogram, and how many there were."""
    counts = {bound: upto[bound] - since.get(bound, 0.0) for bound in sorted(upto)}
    total = counts.get(float("inf"), 0.0)
    p99 = next((b for b, n in counts.items() if n >= total * 0.99), float("inf"))
    worst = next((b for b, n in counts.items() if n >= total), float("inf"))
    return p99, worst, total


def _bound(bound: float) -> str:
    return f"<={bound:g}" if bound != float("inf") else "beyond"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=40_000)
    parser.add_argument("--singles", type=int, default=20)
    parser.add_argument(
        "--reclaim",
        action="store_true",
        help="the singles take slots back from fillers (no Topology)",
    )
    parser.add_argument("--topology", action="store_true",
                        help="--reclaim in racks: half the stored jobs and every single"
                        " rack-required")  # fmt: skip
    parser.add_argument("--without-controller-manager", action="store_true",
                        help="do not run kube-controller-manager (it admits nothing)")  # fmt: skip
    args = parser.parse_args()
    args.reclaim = args.reclaim or args.topology
    leave_out = ("kube-controller-manager",) if args.without_controller_manager else ()
    with living_cluster(leave_out) as (cluster, api, state):
        return Scale(args, cluster, api).run(state)


if __name__ == "__main__":
    sys.exit(main())
