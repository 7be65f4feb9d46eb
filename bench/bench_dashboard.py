"""Dashboard benchmark: the page on 1,000 queues and 40,000 jobs, in headless Chromium.

A DashboardView is fed 1,000 Queues (20 departments, 979 teams, statuses filled as the
operator writes them) and 40,000 Jobs (pending with positions and reasons, and admitted, each
into a rack), then served on loopback, with a Topology of 2,000 nodes (8 blocks x 25 racks x
10 hosts) and 40,000 pods bound to them. Measured: feeding the view (against the floor of a
bare ``json.loads`` of the same objects), and the page load from navigation to the open part
of the tree drawn (against the floor of the same browser loading a bare page that fetches the
same /api/tree and only parses it). Then opening one queue's first page of jobs; working out
the domain view (against the floor of a bare pass adding up the pods' requests per node) and
the page's domains drawn.

Run: ``.venv/bin/python -m bench.bench_dashboard``. Target: the page drawn in <= 1 s, and its
domains too.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import statistics
import sys
import threading
import time
from typing import Any

from aiohttp import web

TARGET_LOAD_S = 1.0
QUEUES = 1000
JOBS = 40_000
RUNS = 5
BLOCKS, RACKS, HOSTS = 8, 25, 10  # racks per block, hosts per rack
PODS = 40_000
BLOCK, RACK, HOST = "example.com/block", "example.com/rack", "kubernetes.io/hostname"
BARE = """<!doctype html><html><body><div id=n></div><script>
fetch('api/tree').then(r => r.json()).then(t => {
  document.getElementById('n').textContent = t.queues.length; document.title = 'done'; });
</script></body></html>"""


def objects() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    queues: list[dict[str, Any]] = [{"metadata": {"name": "root"}, "spec": {}}]
    leaves: list[str] = []
    for d in range(20):
        queues.append(
            {
                "metadata": {"name": f"dept-{d:02d}"},
                "spec": {"parent": "root", "guarantee": {"resource": {"nvidia.com/gpu": "8"}}},
                "status": {"state": "Open", "allocated": {"cpu": "400", "nvidia.com/gpu": "16"}},
            }
        )
    for t in range(QUEUES - 21):
        name = f"team-{t:03d}"
        leaves.append(name)
        queues.append(
            {
                "metadata": {"name": name},
                "spec": {
                    "parent": f"dept-{t % 20:02d}",
                    "capability": {"cpu": "64", "nvidia.com/gpu": "8"},
                    "deserved": {"cpu": "32", "nvidia.com/gpu": "4"},
                },
                "status": {
                    "state": "Open",
                    "pending": 30,
                    "running": 10,
                    "allocated": {"cpu": "40", "nvidia.com/gpu": "5"},
                    "deserved": {"cpu": "32", "nvidia.com/gpu": "4"},
                    "share": 1.25,
                },
            }
        )
    jobs: list[dict[str, Any]] = []
    for i in range(JOBS):
        queue = leaves[i % len(leaves)]
        pending = i % 4 != 0
        annotations = (
            {"sluice.dev/pending-reason": f"position {i // len(leaves) + 1} in {queue}; {queue}"
             " would use nvidia.com/gpu 9 > capability 8"}
            if pending
            else {"sluice.dev/admitted-at": "2026-11-23T08:00:00Z",
                  "sluice.dev/topology-assignment": f"{RACK}=r{i % (BLOCKS * RACKS):03d}"}
        )  # fmt: skip
        jobs.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": f"job-{i:05d}",
                    "namespace": f"ns-{i % 50}",
                    "labels": {"sluice.dev/queue-name": queue},
                    "annotations": annotations,
                    "creationTimestamp": "2026-11-23T07:00:00Z",
                },
                "spec": {
                    "suspend": pending,
                    "parallelism": 4,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "main",
                                    "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": "1"}},
                                }
                            ]
                        }
                    },
                },
                "status": {} if pending else {"active": 4},
            }
        )
    return queues, jobs


def cluster() -> Any:
    """The Topology's nodes and the pods bound to them, as the operator's watches read them."""
    from sluice.api.resources import Resources
    from sluice.api.topology import TopologyView
    from sluice.api.views import NodeView, PodView
    from sluice.dashboard.domains import ClusterViews

    nodes = [
        NodeView(
            f"n{b}-{r}-{h}",
            Resources({"cpu": 64_000, "memory": 512 * 2**30 * 1000, "nvidia.com/gpu": 8_000}),
            labels={BLOCK: f"b{b}", RACK: f"r{b * RACKS + r:03d}", HOST: f"n{b}-{r}-{h}"},
        )
        for b in range(BLOCKS)
        for r in range(RACKS)
        for h in range(HOSTS)
    ]
    request = Resources({"cpu": 4_000, "nvidia.com/gpu": 1_000})
    pods = [
        PodView(f"ns-{i % 50}", f"job-{i:05d}-0", request, node=nodes[i % len(nodes)].name)
        for i in range(PODS)
    ]
    return ClusterViews([TopologyView("default", (BLOCK, RACK, HOST))], nodes, pods)


def serve(view: Any, port: int, ready: threading.Event) -> None:
    from sluice.dashboard.server import build_app

    async def main() -> None:
        app = build_app(view)

        async def bare(_: web.Request) -> web.Response:
            return web.Response(text=BARE, content_type="text/html")

        app.router.add_get("/bare", bare)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def main() -> int:
    from playwright.sync_api import sync_playwright

    from sluice.dashboard.view import DashboardView

    views = cluster()
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    queues, jobs = objects()
    text = json.dumps({"queues": queues, "jobs": jobs})
    began = time.perf_counter()
    json.loads(text)
    parse_floor = time.perf_counter() - began
    view = DashboardView(cluster=lambda: views)
    began = time.perf_counter()
    view.load(queues, jobs)
    feed = time.perf_counter() - began
    domain_times: list[float] = []
    sum_times: list[float] = []
    for _ in range(RUNS):
        began = time.perf_counter()
        view._domains = None  # worked out anew each time
        view.domains()
        domain_times.append(time.perf_counter() - began)
        began = time.perf_counter()
        used: dict[str, dict[str, int]] = {}
        for pod in views.pods:
            room = used.setdefault(pod.node or "", {})
            for r, a in pod.request.items():
                room[r] = room.get(r, 0) + a
        sum_times.append(time.perf_counter() - began)
    domains_bytes = len(json.dumps(view.domains()))
    tree_bytes = len(json.dumps(view.tree()))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ready = threading.Event()
    threading.Thread(target=serve, args=(view, port, ready), daemon=True).start()
    ready.wait(10)
    url = f"http://127.0.0.1:{port}/"
    page_times: list[float] = []
    bare_times: list[float] = []
    open_times: list[float] = []
    drawn_times: list[float] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for _ in range(RUNS):
            page = browser.new_page()
            began = time.perf_counter()
            page.goto(url + "bare")
            page.wait_for_function("document.title === 'done'")
            bare_times.append(time.perf_counter() - began)
            page.close()
            page = browser.new_page()
            began = time.perf_counter()
            page.goto(url)
            page.wait_for_selector('[data-queue="dept-19"]')
            page_times.append(time.perf_counter() - began)
            began = time.perf_counter()
            page.click('[data-queue="dept-00"] .name')
            page.click('[data-queue="team-000"] .name')
            page.wait_for_selector('[data-job="ns-0/job-00000"]')
            open_times.append(time.perf_counter() - began)
            page.close()
            page = browser.new_page()
            began = time.perf_counter()
            page.goto(url)
            page.wait_for_selector(f'[data-domain="{BLOCK}=b7"]')
            drawn_times.append(time.perf_counter() - began)
            page.close()
        browser.close()
    load = statistics.median(page_times)
    bare = statistics.median(bare_times)
    print(f"[bench] dashboard: {QUEUES:,} queues, {JOBS:,} jobs; median of {RUNS}", file=sys.stderr)
    print(f"{'measure':<44} {'sluice':>9} {'floor':>9} {'ratio':>7}")
    print("-" * 72)
    print(f"{'feed the view from the objects (s)':<44} {feed:>9.2f} {parse_floor:>9.2f}"
          f" {feed / parse_floor:>6.1f}x   (floor: bare json.loads of them)")  # fmt: skip
    print(f"{'page load to the tree drawn (s)':<44} {load:>9.3f} {bare:>9.3f}"
          f" {load / bare:>6.1f}x   (floor: a bare page fetching the same tree)")  # fmt: skip
    print(f"{'open a queue, its first 50 jobs drawn (s)':<44}"
          f" {statistics.median(open_times):>9.3f}")  # fmt: skip
    print(f"{'/api/tree size (KiB)':<44} {tree_bytes / 1024:>9.0f}")
    domains, summed = statistics.median(domain_times), statistics.median(sum_times)
    print(f"{'domain view, 2,000 nodes, 40,000 pods (s)':<44} {domains:>9.3f} {summed:>9.3f}"
          f" {domains / summed:>6.1f}x   (floor: adding up the pods' requests"
          " per node)")  # fmt: skip
    print(f"{'page load to the domains drawn (s)':<44} {statistics.median(drawn_times):>9.3f}")
    print(f"{'/api/topology size (KiB)':<44} {domains_bytes / 1024:>9.0f}")
    met = load <= TARGET_LOAD_S
    print(f"\ntarget: page drawn in <= {TARGET_LOAD_S:g} s: {'met' if met else 'NOT met'}")
    met = statistics.median(drawn_times) <= TARGET_LOAD_S
    print(f"target: domains drawn in <= {TARGET_LOAD_S:g} s: {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
