"""The dashboard's server (JSON, paging, the event stream) and `sluice simulate --html`."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from sluice.cli.simulate import simulate_file, write_report
from sluice.dashboard.server import build_app
from sluice.dashboard.view import DashboardView

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "cluster.yaml"


def managed(name: str) -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": "ml", "labels": {"sluice.dev/queue-name": "q"}},
        "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }


async def test_the_server_serves_the_tree_pages_and_pushes_changes() -> None:
    view = DashboardView()
    view.load([{"metadata": {"name": "q"}, "spec": {"parent": "root"}}], [managed("a")])
    async with TestClient(TestServer(build_app(view))) as client:
        page = await client.get("/")
        assert page.status == 200 and "static/app.js" in await page.text()
        assert (await client.get("/static/app.js")).status == 200
        assert (await client.get("/static/secrets.txt")).status == 404
        tree = await (await client.get("/api/tree")).json()
        assert [q["name"] for q in tree["queues"]] == ["q"]
        jobs = await (await client.get("/api/queues/q/jobs?limit=1")).json()
        assert (jobs["total"], [j["name"] for j in jobs["jobs"]]) == (1, ["a"])
        assert (await client.get("/api/queues/q/jobs?limit=x")).status == 400
        stream = await client.get("/api/events")
        first = await asyncio.wait_for(stream.content.readline(), 5)
        assert first.startswith(b"data: ")
        await stream.content.readline()  # the blank line ending the event
        view.on_job("ADDED", managed("b"))
        pushed = await asyncio.wait_for(stream.content.readline(), 5)
        assert int(pushed.split()[1]) == view.version
        stream.close()


def test_simulate_html_is_one_self_contained_page_with_before_and_after(tmp_path: Path) -> None:
    sim = simulate_file(EXAMPLE, cycles=2, report=True)
    out = tmp_path / "report.html"
    write_report(sim, out, "what if")
    html = out.read_text()
    assert "<title>what if</title>" in html
    assert not re.search(r"""(src|href)=["'](?!#)""", html), "nothing may be fetched"
    data = json.loads(html.split("window.SLUICE_DATA = ", 1)[1].split(";</script>", 1)[0])
    names = {q["name"] for q in data["tree"]["queues"]}
    assert {"root", "research", "nlp"} <= names
    history = data["history"]["nlp"]["nvidia.com/gpu"]
    assert set(history) == {"deservedBefore", "allocatedBefore", "deservedAfter", "allocatedAfter"}
    decided = {d.job for _, d in sim.decisions}
    assert {t["job"] for t in data["tree"]["timeline"]} == decided
    pending = {f"{j['namespace']}/{j['name']}" for jobs in data["jobs"].values() for j in jobs}
    assert pending == {p.job for p in sim.final.pending}
