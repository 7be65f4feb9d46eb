"""Flavors on the living cluster: the operator counts, in each Flavor's status, the Ready,
schedulable KWOK nodes that carry its labels (`kubectl get flavors` shows NODES), and says
Matched=False for a Flavor none carries; both follow the nodes as they are relabelled and
cordoned."""

from __future__ import annotations

from typing import Any

from .components import Operator
from .helpers import Kubectl, unique_name, wait_for
from .scenario import Scenario
from .test_operator import operator

__all__ = ["operator"]  # the fixture: sluice's operator, started once for the module


def create_flavor(kubectl: Kubectl, name: str, labels: dict[str, str]) -> None:
    kubectl.create(
        {
            "apiVersion": "scheduling.sluice.dev/v1beta1",
            "kind": "Flavor",
            "metadata": {"name": name},
            "spec": {"nodeLabels": labels},
        }
    )


def status(kubectl: Kubectl, name: str) -> dict[str, Any]:
    found = kubectl.get("flavor", name).get("status") or {}
    matched = [c for c in found.get("conditions") or () if c["type"] == "Matched"]
    return {"nodes": found.get("nodes"), "matched": matched[0] if matched else {}}


def test_a_flavor_counts_the_ready_schedulable_nodes_that_carry_its_labels(
    operator: Operator, kubectl: Kubectl, namespace: str
) -> None:
    s = Scenario(kubectl, namespace)
    tag = unique_name("f")
    model = f"{tag}.e2e.sluice.dev/model"
    h100 = [s.node(4, labels={model: "H100"}) for _ in range(3)]
    a100 = [s.node(4, labels={model: "A100"}) for _ in range(2)]
    s.node(4, labels={model: "H100"}, unschedulable=True)  # cordoned: no pod may go there
    names = {m: f"{tag}-{m}" for m in ("h100", "a100", "l4")}
    for short, name in names.items():
        create_flavor(kubectl, name, {model: short.upper()})
    try:

        def counted(short: str, nodes: int) -> dict[str, Any] | None:
            found = status(kubectl, names[short])
            return found if found["nodes"] == nodes and found["matched"] else None

        h = wait_for(lambda: counted("h100", 3), what="h100's status")
        assert (h["matched"]["status"], h["matched"]["reason"]) == ("True", "NodesMatch")
        assert wait_for(lambda: counted("a100", 2), what="a100's status")
        none = wait_for(lambda: counted("l4", 0), what="l4's status")["matched"]
        assert (none["status"], none["reason"]) == ("False", "NoNodes")
        assert none["message"] == f"no Ready, schedulable node carries its labels ({model}=L4)"
        table = kubectl.run("get", "flavor", names["h100"]).splitlines()
        column = table[0].index("NODES")  # kubectl aligns the columns; some may be empty
        assert table[1][column:].split()[0] == "3", table
        # An A100 node relabelled H100, then an H100 node cordoned: the counts follow.
        kubectl.run("label", "node", a100[0], f"{model}=H100", "--overwrite")
        wait_for(lambda: counted("h100", 4) and counted("a100", 1), what="the relabelled node")
        kubectl.run("cordon", h100[0])
        wait_for(lambda: counted("h100", 3), what="the cordoned node left out")
        kubectl.run("label", "node", a100[1], f"{model}=L4", "--overwrite")
        wait_for(lambda: counted("l4", 1), what="l4 to match a node")
        matched = status(kubectl, names["l4"])["matched"]
        assert (matched["status"], matched["reason"]) == ("True", "NodesMatch")
        found = wait_for(lambda: counted("a100", 0), what="a100 to match none")
        assert found["matched"]["status"] == "False"
    finally:
        for name in names.values():
            kubectl.delete("flavor", name)
