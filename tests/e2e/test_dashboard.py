"""The operator's dashboard in a real headless browser (Debian's Chromium, driven by
Playwright), on the living cluster with the demo's queue tree: the tree shows the queues'
numbers, and a job created meanwhile appears in its queue's list and turns running once
admitted, all without a reload."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import Browser, Page, expect, sync_playwright

from .components import free_port, sluice_system
from .helpers import Kubectl, controlplane, wait_for
from .scenario import Scenario

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
