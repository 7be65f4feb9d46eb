"""The operator's dashboard in a real headless browser (Debian's Chromium, driven by
Playwright), on the living cluster with the demo's queue tree: the tree shows the queues'
numbers, and a job created meanwhile appears in its queue's list and turns running once
admitted, all without a reload; on nodes labelled in blocks and racks, the domains of the
Topology with their free room and jobs, and each job's domain; and ``sluice dashboard``'s own
watches (a laptop's) giving the same domains as the operator's."""

from __future__ import annotations

import json
import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import Browser, Page, expect, sync_playwright

from sluice.dashboard.feed import Feed
from sluice.dashboard.view import DashboardView
from sluice.kube import api_client

from .components import free_port, sluice_system
from .helpers import Kubectl, controlplane, wait_for
from .scenario import Scenario
from .test_topology import Racks

DEMO = Path(__file__).parents[2] / "examples" / "demo" / "queues.yaml"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def dashboard(
    control_plane: controlplane.Cluster, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    port = free_port()
    workdir = tmp_path_factory.mktemp("dashboard")
    with sluice_system(control_plane, kubectl, workdir, "dashboard", dashboard_port=port):
        url = f"http://127.0.0.1:{port}/"
        wait_for(lambda: _up(url), timeout=30, what="the dashboard to serve")
        yield url


def _up(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url + "api/tree", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: install Debian's chromium package")
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


def demo_queues(prefix: str) -> list[dict[str, Any]]:
    """The demo's tree, named for this test (the cluster is shared)."""
    out = []
    for doc in yaml.safe_load_all(DEMO.read_text()):
        doc["metadata"]["name"] = f"{prefix}-{doc['metadata']['name']}"
        if doc["spec"].get("parent"):
            doc["spec"]["parent"] = f"{prefix}-{doc['spec']['parent']}"
        out.append(doc)
    return out


def test_the_page_shows_the_tree_and_a_job_moving_without_reload(
    dashboard: str, browser: Browser, kubectl: Kubectl, namespace: str
) -> None:
    s = Scenario(kubectl, namespace)
    s.node(2)
    for queue in demo_queues(s.prefix):
        kubectl.create(queue)
    research, nlp = s.name("research"), s.name("nlp")
    wait_for(
        lambda: (kubectl.get("queue", nlp).get("status") or {}).get("state") == "Open",
        what="the operator's status on the demo queues",
    )
    page: Page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(dashboard)
    expect(page.locator("#status")).to_have_text("live")
    row = page.locator(f'[data-queue="{research}"]')
    expect(row).to_be_visible()
    # research: weight 1, a guarantee of 2 GPUs, nothing pending or running yet.
    gpu = row.locator(".bar-label", has_text="nvidia.com/gpu")
    expect(gpu).to_contain_text("nvidia.com/gpu: allocated 0 · guarantee 2")
    expect(row.locator("[data-counts]")).to_have_text("0/0")
    page.locator(f'[data-queue="{research}"] .name').click()
    page.locator(f'[data-queue="{nlp}"] .name').click()
    s.job("train", "nlp", 1)
    job = page.locator(f'[data-job="{namespace}/train"]')
    expect(job).to_be_visible(timeout=20_000)
    expect(job).to_have_attribute("data-state", "running", timeout=30_000)
    expect(page.locator("#timeline li", has_text=f"{namespace}/train")).to_contain_text("Admitted")
    expect(page.locator(f'[data-queue="{nlp}"] [data-counts]')).to_have_text("0/1", timeout=20_000)
    assert errors == []
    page.close()


def test_the_page_shows_each_jobs_domain_and_the_free_room_of_each_domain(
    dashboard: str, browser: Browser, kubectl: Kubectl, namespace: str
) -> None:
    s = Scenario(kubectl, namespace)
    t = Racks(s, kubectl)  # 16 nodes of 4: 2 blocks x 4 racks x 2 nodes
    team = s.queue("team")
    t.job("train", "team", 2, 4, t.required())  # 4 x 2: all of rack r0
    s.wait_admitted("train")
    t.nodes_of("train", 4)  # bound: their room is taken
    t.job("big", "team", 4, 4, t.required())  # 4 x 4: more than any rack holds
    wait_for(lambda: s.annotation("big", "pending-reason"), what="big's reason")
    page: Page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(dashboard)
    topology = page.locator(f'[data-topology="{t.topology}"]')
    expect(topology).to_be_visible(timeout=20_000)
    # The widest level first: block b0 holds the job, admitted into its rack r0.
    b0 = topology.locator(f'[data-domain="{t.block}=b0"]')
    expect(b0.locator("[data-nodes]")).to_have_text("8")
    expect(b0.locator(f'[data-room="{s.resource}"]')).to_contain_text(
        f"{s.resource} 24 free of 32", timeout=20_000
    )
    expect(b0.locator("[data-jobs]")).to_have_text(f"1: {namespace}/train")
    b1 = topology.locator(f'[data-domain="{t.block}=b1"]')
    expect(b1.locator(f'[data-room="{s.resource}"]')).to_contain_text("32 free of 32")
    expect(b1.locator("[data-jobs]")).to_have_text("-")
    topology.locator(f'[data-level="{t.rack}"]').click()
    r0 = topology.locator(f'[data-domain="{t.rack}=r0"]')
    expect(r0.locator(f'[data-room="{s.resource}"]')).to_contain_text("0 free of 8")
    expect(r0.locator("[data-jobs]")).to_have_text(f"1: {namespace}/train")
    expect(topology.locator(f'[data-domain="{t.rack}=r1"] [data-jobs]')).to_have_text("-")
    # The queue's jobs: where the admitted one runs, what the waiting one asks.
    page.locator(f'[data-queue="{team}"] .name').click()
    expect(page.locator(f'[data-job="{namespace}/train"] [data-domain]')).to_have_text(
        f"{t.rack}=r0"
    )
    expect(page.locator(f'[data-job="{namespace}/big"] [data-domain]')).to_have_text(
        f"asks required {t.rack}"
    )
    assert errors == []
    page.close()


def test_sluice_dashboard_on_a_laptop_shows_the_domains_the_operator_shows(
    dashboard: str, control_plane: controlplane.Cluster, kubectl: Kubectl, namespace: str
) -> None:
    s = Scenario(kubectl, namespace)
    t = Racks(s, kubectl)
    s.queue("team")
    t.job("train", "team", 2, 4, t.required())  # all of rack r0
    s.wait_admitted("train")
    t.nodes_of("train", 4)
    view = DashboardView()
    feed = Feed(api_client(str(control_plane.kubeconfig)), view)
    feed.start()
    shown = {t.topology: t.rack}

    def ours(data: dict[str, Any]) -> dict[str, Any]:
        return next((dict(one) for one in data["topologies"] if one["name"] == t.topology), {})

    def operators() -> dict[str, Any]:
        url = f"{dashboard}api/topology?show={t.topology}:{t.rack}"
        with urllib.request.urlopen(url, timeout=5) as resp:
            return ours(json.load(resp))

    def both_settled() -> tuple[dict[str, Any], dict[str, Any]] | None:
        laptop, operator = ours(view.domains(shown)), operators()
        racks = laptop.get("levels", [{}, {}])[1].get("domains", [])
        r0 = next((d for d in racks if d["value"] == "r0"), {"free": {}, "jobs": []})
        full = r0["free"].get(s.resource, {}).get("m") == 0
        done = full and r0["jobs"] == [f"{namespace}/train"]
        return (laptop, operator) if done and laptop == operator else None

    try:
        laptop, _ = wait_for(both_settled, timeout=30, what="the same domains on both")
    finally:
        feed.stop.set()
    assert [(lv["nodeLabel"], lv["domainCount"]) for lv in laptop["levels"]] == [
        (t.block, 2),
        (t.rack, 8),
    ]
