"""The dashboard's domain view: per Topology and level, each domain's nodes, free room and
total of its usable nodes, and the jobs admitted into it or into a domain inside it; the jobs
of a queue say their domain, or what they ask while they wait."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from sluice.api.resources import Resources
from sluice.api.topology import TopologyView
from sluice.api.views import NodeView, PodView, PublishedJob
from sluice.dashboard.domains import ClusterViews, Watched, topology_json
from sluice.dashboard.server import build_app
from sluice.dashboard.view import DashboardView

BLOCK, RACK = "example.com/block", "example.com/rack"
TOPOLOGY = TopologyView("default", (BLOCK, RACK))
GPU = "nvidia.com/gpu"


def node(name: str, block: str, rack: str, *, ready: bool = True) -> NodeView:
    return NodeView(
        name, Resources({GPU: 8000, "cpu": 64000}), ready=ready, labels={BLOCK: block, RACK: rack}
    )


NODES = [node("n0", "b0", "r0"), node("n1", "b0", "r0"), node("n2", "b0", "r1"),
         node("n3", "b1", "r2", ready=False)]  # fmt: skip


def pod(name: str, on: str | None, gpus: int, *, finished: bool = False) -> PodView:
    return PodView("ml", name, Resources({GPU: gpus * 1000}), node=on, finished=finished)


PODS = [
    pod("a", "n0", 8),
    pod("b", "n1", 2),
    pod("c", "n2", 1),
    pod("done", "n2", 7, finished=True),  # finished: takes nothing
    pod("pending", None, 8),  # not bound: takes nothing yet
    pod("d", "n3", 8),  # on a node not usable: counted nowhere
]


def admitted(name: str, domain: str) -> PublishedJob:
    return PublishedJob("ml", name, "team", "running", domain=domain)


def domains(data: dict[str, Any], level: str) -> dict[str, dict[str, Any]]:
    """The domains of the level shown (which must be ``level``)."""
    (topology,) = data["topologies"]
    assert topology["shown"] == level
    (found,) = [lv for lv in topology["levels"] if lv["nodeLabel"] == level]
    return {d["value"]: d for d in found["domains"]}


def both(views: ClusterViews, jobs: list[PublishedJob]) -> tuple[dict[str, Any], ...]:
    """The data with blocks shown (the widest, unless told), and with racks shown."""
    return topology_json(views, jobs), topology_json(views, jobs, {"default": RACK})


def test_each_domain_has_its_nodes_free_room_of_total_and_the_jobs_in_it() -> None:
    jobs = [admitted("train", f"{RACK}=r0"), admitted("wide", f"{BLOCK}=b0")]
    data, by_rack = both(ClusterViews([TOPOLOGY], NODES, PODS), jobs)
    assert [
        (lv["nodeLabel"], lv["domainCount"], "domains" in lv)
        for lv in data["topologies"][0]["levels"]
    ] == [
        (BLOCK, 2, True),
        (RACK, 3, False),
    ]
    racks = domains(by_rack, RACK)
    assert list(racks) == ["r0", "r1", "r2"]
    r0 = racks["r0"]
    assert (r0["nodes"], r0["unusable"]) == (2, 0)
    assert (r0["free"][GPU]["s"], r0["total"][GPU]["s"]) == ("6", "16")
    assert racks["r1"]["free"][GPU]["m"] == 7000
    assert (racks["r2"]["nodes"], racks["r2"]["unusable"], racks["r2"]["total"]) == (1, 1, {})
    assert (r0["jobCount"], r0["jobs"]) == (1, ["ml/train"])
    assert racks["r1"]["jobCount"] == 0
    blocks = domains(data, BLOCK)
    assert blocks["b0"]["free"][GPU]["m"] == 13000
    # A job admitted into rack r0 is in block b0 as well; one admitted into b0 in no rack.
    assert blocks["b0"]["jobs"] == ["ml/train", "ml/wide"]
    assert data["topologies"][0]["notNested"] == ""


def test_a_topology_that_does_not_nest_says_so_and_places_no_job_in_a_wider_domain() -> None:
    split = [*NODES, node("n4", "b1", "r0")]  # r0 in two blocks
    data, by_rack = both(ClusterViews([TOPOLOGY], split, PODS), [admitted("t", f"{RACK}=r0")])
    assert (
        "example.com/rack=r0 is in two example.com/block domains"
        in (data["topologies"][0]["notNested"])
    )
    assert domains(by_rack, RACK)["r0"]["jobs"] == ["ml/t"]
    assert all(d["jobCount"] == 0 for d in domains(data, BLOCK).values())


def test_no_topology_no_domain_view() -> None:
    assert topology_json(ClusterViews([], NODES, PODS), []) == {"topologies": []}
    assert DashboardView().domains() == {"topologies": []}


def job(name: str, **annotations: str) -> dict[str, Any]:
    template: dict[str, Any] = {
        "metadata": {"annotations": {"sluice.dev/topology-required": RACK}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {GPU: "1"}}}]},
    }
    return {
        "metadata": {
            "name": name,
            "namespace": "ml",
            "labels": {"sluice.dev/queue-name": "team"},
            "annotations": {f"sluice.dev/{k}": v for k, v in annotations.items()},
        },
        "spec": {"suspend": not annotations, "template": template},
        "status": {"active": 1} if annotations else {},
    }


async def test_the_view_serves_the_jobs_domains_and_the_domain_view() -> None:
    view = DashboardView(cluster=lambda: ClusterViews([TOPOLOGY], NODES, PODS))
    view.load(
        [{"metadata": {"name": "team"}, "spec": {"parent": "root"}}],
        [job("running", **{"topology-assignment": f"{RACK}=r1"}), job("waiting")],
    )
    async with TestClient(TestServer(build_app(view))) as client:
        page = await (await client.get("/api/queues/team/jobs")).json()
        said = {j["name"]: (j["domain"], j["asks"]) for j in page["jobs"]}
        assert said == {
            "running": (f"{RACK}=r1", f"required {RACK}"),
            "waiting": ("", f"required {RACK}"),
        }
        data = await (await client.get(f"/api/topology?show=default:{RACK}")).json()
        assert domains(data, RACK)["r1"]["jobs"] == ["ml/running"]
        blocks = await (await client.get("/api/topology?show=default:nothing")).json()
        assert list(domains(blocks, BLOCK)) == ["b0", "b1"]


def test_the_domain_view_is_worked_out_again_only_after_a_while() -> None:
    asked: list[int] = []

    def cluster() -> ClusterViews:
        asked.append(1)
        return ClusterViews([TOPOLOGY], NODES, PODS)

    view = DashboardView(cluster=cluster)
    assert view.domains() == view.domains({"default": BLOCK})
    assert len(asked) == 1


def test_a_level_of_many_domains_sends_the_first_ones_unless_all_are_asked() -> None:
    hosts = TopologyView("hosts", ("kubernetes.io/hostname",))
    many = [
        NodeView(
            f"h{i:03d}", Resources({GPU: 8000}), labels={"kubernetes.io/hostname": f"h{i:03d}"}
        )
        for i in range(150)
    ]
    first = topology_json(ClusterViews([hosts], many, []), [])
    (level,) = first["topologies"][0]["levels"]
    assert (level["domainCount"], len(level["domains"])) == (150, 100)
    assert level["domains"][-1]["value"] == "h099"
    every = topology_json(ClusterViews([hosts], many, []), [], limit=1000)
    assert len(every["topologies"][0]["levels"][0]["domains"]) == 150


def obj(name: str, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **extra.pop("meta", {})}, **extra}


def test_sluice_dashboard_keeps_what_its_watches_list_and_tell() -> None:
    watched = Watched()
    topology = obj("default", spec={"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}]})
    gpu_node = obj("n0", meta={"labels": {BLOCK: "b0", RACK: "r0"}},
                   status={"allocatable": {GPU: "8"},
                           "conditions": [{"type": "Ready", "status": "True"}]})  # fmt: skip
    container = {"name": "c", "resources": {"requests": {GPU: "3"}}}
    bound = obj("p", meta={"namespace": "ml"}, spec={"nodeName": "n0", "containers": [container]})
    watched.on_listing("Topology", [topology])
    watched.on_listing("Node", [gpu_node, obj("gone")])
    watched.on_event("Pod", "ADDED", bound)
    watched.on_event("Node", "DELETED", obj("gone"))
    watched.on_event("Topology", "ADDED", obj("broken", spec={"levels": []}))  # unreadable
    views = watched()
    assert [t.name for t in views.topologies] == ["default"]
    assert [n.name for n in views.nodes] == ["n0"]
    assert domains(topology_json(views, [], {"default": RACK}), RACK)["r0"]["free"][GPU]["s"] == "5"
    watched.on_listing("Pod", [])  # listed again: the pod is gone
    assert watched().pods == []
