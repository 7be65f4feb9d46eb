"""The faults, one at a time, in a seeded random order with seeded random gaps and lengths.

Each fault returns when it has healed (for a kill: at once; the supervisor starts the process
again) and is recorded with when it began and healed, wall clock, for the recovery figures.
"""

from __future__ import annotations

import json
import os
import random
import signal
import ssl
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from chaos import load
from chaos.system import LEASE, NAMESPACE, System

KINDS = (
    "kill-leader",
    "kill-follower",
    "kill-webhook",
    "webhooks-down",
    "partition-leader",
    "apiserver-restart",
    "etcd-pause",
    "node-notready",
    "node-delete",
    "controller-manager-stop",
)


@dataclass
class Fault:
    kind: str
    began: float
    healed: float = 0.0
    detail: str = ""
    leader: str = ""
    """The Lease holder when the fault began (kills and partitions of operators)."""
    closed: tuple[float, float] | None = None
    """While no webhook replica ran (webhooks-down): no tenant write may be taken then."""


@dataclass
class Injector:
    system: System
    admin: client.ApiClient
    rng: random.Random
    log: Callable[[str], None]
    faults: list[Fault] = field(default_factory=list)
    _bag: list[str] = field(default_factory=list)
    _replacements: int = 0

    def next_kind(self) -> str:
        """Every kind once, in a random order, then again: a short soak still mixes them."""
        if not self._bag:
            self._bag = list(KINDS)
            self.rng.shuffle(self._bag)
        return self._bag.pop()

    def inject(self, kind: str) -> Fault:
        fault = Fault(kind, time.time())
        getattr(self, "_" + kind.replace("-", "_"))(fault)
        if not fault.healed:
            fault.healed = time.time()
        self.faults.append(fault)
        return fault

    # helpers ------------------------------------------------------------------------------
    def holder(self) -> str:
        for _ in range(100):
            try:
                lease = client.CoordinationV1Api(self.admin).read_namespaced_lease(LEASE, NAMESPACE)
                holder = lease.spec.holder_identity if lease.spec else None
                if holder in self.system.replicas:
                    return str(holder)
            except Exception:  # noqa: BLE001 - the API server may be on its way back
                pass
            time.sleep(0.5)
        raise RuntimeError("no operator replica holds the Lease")

    def _hold(self, low: float, high: float) -> float:
        seconds = self.rng.uniform(low, high)
        time.sleep(seconds)
        return seconds

    def _busiest_node(self) -> str:
        """The schedulable node running the most queued pods (ties broken at random)."""
        core: Any = client.CoreV1Api(self.admin)  # raw answers: plain JSON
        pods = json.loads(
            core.list_pod_for_all_namespaces(
                label_selector=load.QUEUE_LABEL, _preload_content=False
            ).data
        )["items"]
        count: dict[str, int] = {}
        for pod in pods:
            where = pod["spec"].get("nodeName")
            if where and pod.get("status", {}).get("phase") == "Running":
                count[where] = count.get(where, 0) + 1
        nodes = json.loads(core.list_node(_preload_content=False).data)["items"]
        names = [n["metadata"]["name"] for n in nodes if not n["spec"].get("unschedulable")]
        return str(max(names, key=lambda n: (count.get(n, 0), self.rng.random())))

    # operators ----------------------------------------------------------------------------
    def _kill_leader(self, fault: Fault) -> None:
        fault.leader = self.holder()
        fault.began = time.time()
        self.system.replicas[fault.leader].kill()
        fault.detail = fault.leader

    def _kill_follower(self, fault: Fault) -> None:
        fault.leader = self.holder()
        follower = next(n for n in self.system.operators() if n != fault.leader)
        fault.began = time.time()
        self.system.replicas[follower].kill()
        fault.detail = follower

    def _partition_leader(self, fault: Fault) -> None:
        fault.leader = self.holder()
        mode = self.rng.choice(["drop", "blackhole"])
        link = self.system.links[fault.leader]
        fault.began = time.time()
        link.cut(mode)
        seconds = self._hold(6, 30)
        link.heal()
        fault.detail = f"{fault.leader} {mode} for {seconds:.1f} s"

    # webhooks -----------------------------------------------------------------------------
    def _kill_webhook(self, fault: Fault) -> None:
        name = self.rng.choice(self.system.webhooks())
        self.system.replicas[name].kill()
        fault.detail = name

    def _webhooks_down(self, fault: Fault) -> None:
        replicas = [self.system.replicas[n] for n in self.system.webhooks()]
        for replica in replicas:
            replica.held = True
        for replica in replicas:
            replica.kill()
        fault.began = time.time()
        seconds = self._hold(4, 10)
        fault.detail = f"both down for {seconds:.1f} s"
        fault.closed = (fault.began, time.time())
        for replica in replicas:
            replica.held = False
        self._until_a_webhook_ready()

    def _until_a_webhook_ready(self, timeout: float = 60) -> None:
        context = ssl.create_default_context(cafile=str(self.system.cluster.ca_cert))
        deadline = time.time() + timeout
        while time.time() < deadline:
            for port in self.system.webhook_ports:
                try:
                    url = f"https://127.0.0.1:{port}/readyz"
                    with urllib.request.urlopen(url, context=context, timeout=2) as answer:
                        if answer.status == 200:
                            return
                except OSError:
                    pass
            time.sleep(0.2)

    # the control plane --------------------------------------------------------------------
    def _apiserver_restart(self, fault: Fault) -> None:
        os.kill(self.system.plane.pid("kube-apiserver"), signal.SIGKILL)
        seconds = self._hold(1, 5)
        self.system.plane.relaunch("kube-apiserver")
        fault.detail = f"down {seconds:.1f} s, ready again after {time.time() - fault.began:.1f} s"

    def _etcd_pause(self, fault: Fault) -> None:
        pid = self.system.plane.pid("etcd")
        os.kill(pid, signal.SIGSTOP)
        try:
            seconds = self._hold(2, 8)
        finally:
            os.kill(pid, signal.SIGCONT)
        fault.detail = f"paused {seconds:.1f} s"

    def _controller_manager_stop(self, fault: Fault) -> None:
        os.kill(self.system.plane.pid("kube-controller-manager"), signal.SIGTERM)
        seconds = self._hold(20, 50)
        self.system.plane.relaunch("kube-controller-manager")
        fault.detail = f"stopped {seconds:.1f} s"

    # nodes --------------------------------------------------------------------------------
    def _node_notready(self, fault: Fault) -> None:
        """KWOK lets the node go and its Ready condition turns False: the node-lifecycle
        controller taints it, its pods are evicted and their controllers make them again
        elsewhere. Healed by replacing the node with a fresh one of the same name."""
        core = client.CoreV1Api(self.admin)
        name = self._busiest_node()
        core.patch_node(name, {"metadata": {"annotations": {"kwok.x-k8s.io/node": None}}})
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        core.patch_node_status(
            name,
            {"status": {"conditions": [{
                "type": "Ready", "status": "False", "reason": "ChaosNotReady",
                "message": "made NotReady by the chaos soak",
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            }]}},
        )  # fmt: skip
        seconds = self._hold(15, 35)
        core.delete_node(name)
        self._recreate(name)
        fault.detail = f"{name} NotReady for {seconds:.1f} s, then replaced"

    def _node_delete(self, fault: Fault) -> None:
        core = client.CoreV1Api(self.admin)
        name = self._busiest_node()
        core.patch_node(name, {"spec": {"unschedulable": True}})
        time.sleep(1)
        core.delete_node(name)
        seconds = self._hold(5, 20)
        self._replacements += 1
        replacement = f"node-r{self._replacements:02d}"
        self._recreate(replacement)
        fault.detail = f"{name} cordoned and deleted; {replacement} joined {seconds:.1f} s later"

    def _recreate(self, name: str) -> None:
        core = client.CoreV1Api(self.admin)
        for _ in range(100):
            try:
                core.create_node(load.node(name))
                return
            except client.ApiException as err:
                if err.status != 409:  # 409: the old one is still being removed
                    raise
            time.sleep(0.3)
