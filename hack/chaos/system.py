"""The system under faults: the control plane as `make dev-up` builds it (the chart installed
with its components run locally), two operator replicas sharing the chart's Lease, each
talking to the API server through a link of its own (``proxy.Proxy``) that a fault can cut,
and two webhook replicas behind a round-robin proxy the webhook configurations point at.

Every process of sluice's is supervised as the kubelet would: one that exits (killed, or a
leader that lost its Lease) is started again after ``RESTART_DELAY`` unless a fault holds
it down.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import controlplane
import devenv

from chaos.proxy import Proxy

RELEASE, NAMESPACE = "sluice", "sluice-system"
LEASE = "sluice-operator"
LEASE_SECONDS = 15  # the chart's default (operator.leaseSeconds)
RESTART_DELAY = 2.0
OPERATOR_USER = "system:serviceaccount:sluice-system:sluice-operator"

AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Request",
            "users": [OPERATOR_USER],
            "verbs": ["patch", "delete"],
            "resources": [
                {"group": "batch", "resources": ["jobs"]},
                {"group": "", "resources": ["pods"]},
            ],
        },
        {
            "level": "Metadata",
            "users": [OPERATOR_USER],
            "verbs": ["create", "update", "patch", "delete"],
        },
        {"level": "None"},
    ],
}
"""Every write of the operator replicas, with the replica in its user agent: who wrote what
when, to the microsecond, as the API server saw it (with the patch itself for workloads: an
admission or an eviction)."""


@dataclass
class Replica:
    """One supervised process of sluice's."""

    name: str
    start: Callable[[], subprocess.Popen[bytes]]
    process: subprocess.Popen[bytes] | None = None
    held: bool = False
    """Held down by a fault: not started again until released."""
    restarts: int = 0

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None:
            devenv.stop(self.process.pid)
            self.process.wait(10)


@dataclass
class System:
    state: Path
    plane: controlplane.ControlPlane
    cluster: controlplane.Cluster
    webhook_ports: list[int]
    webhook_proxy: Proxy
    links: dict[str, Proxy]
    """Each operator replica's link to the API server, by identity."""
    replicas: dict[str, Replica] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def audit_log(self) -> Path:
        return self.state / "audit.log"

    def operators(self) -> list[str]:
        return [name for name in self.replicas if name.startswith("operator-")]

    def webhooks(self) -> list[str]:
        return [name for name in self.replicas if name.startswith("webhooks-")]

    def supervise(self) -> None:
        threading.Thread(target=self._supervise, name="supervisor", daemon=True).start()

    def _supervise(self) -> None:
        down_since: dict[str, float] = {}
        while not self._stop.wait(0.2):
            for replica in self.replicas.values():
                if replica.alive() or replica.held:
                    down_since.pop(replica.name, None)
                    continue
                since = down_since.setdefault(replica.name, time.monotonic())
                if time.monotonic() - since >= RESTART_DELAY:
                    replica.process = replica.start()
                    replica.restarts += 1
                    down_since.pop(replica.name, None)

    def shutdown(self) -> None:
        self._stop.set()
        for replica in self.replicas.values():
            replica.held = True
            replica.stop()
        self.webhook_proxy.stop()
        for link in self.links.values():
            link.stop()
        self.plane.down()


def _kubectl(cluster: controlplane.Cluster, *args: str, input: str | None = None) -> str:
    return subprocess.run(
        [str(cluster.kubectl), f"--kubeconfig={cluster.kubeconfig}", *args],
        input=input,
        text=True,
        capture_output=True,
        check=True,
    ).stdout


def up(repo: Path, state: Path, scheduler_config: str, log: Callable[[str], None]) -> System:
    """A fresh cluster in ``state`` (any previous one there is stopped first) with sluice."""
    state.mkdir(parents=True, exist_ok=True)
    for old_log in state.glob("*.log"):
        old_log.unlink()  # sluice's logs of an earlier soak
    policy = state / "audit-policy.json"
    policy.write_text(json.dumps(AUDIT_POLICY))
    (state / "audit.log").unlink(missing_ok=True)
    plane = controlplane.ControlPlane(
        state,
        tie_to_parent=True,
        apiserver_args=(
            f"--audit-policy-file={policy}",
            f"--audit-log-path={state / 'audit.log'}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
        ),
    )
    plane.down()
    controlplane.build()
    cluster = plane.up()
    certs = state / "webhook-tls"
    certs.mkdir(exist_ok=True)
    cert, key = controlplane.issue_serving_cert(cluster, certs)
    webhook_ports = [devenv.free_port(), devenv.free_port()]
    webhook_proxy = Proxy(webhook_ports, "webhooks")
    system = System(state, plane, cluster, webhook_ports, webhook_proxy, {})
    for index, port in enumerate(webhook_ports):
        name = f"webhooks-{'ab'[index]}"

        def start_webhooks(port: int = port, name: str = name) -> subprocess.Popen[bytes]:
            return devenv.start_webhooks(cluster.kubeconfig, cert, key, port, state / f"{name}.log")

        system.replicas[name] = Replica(name, start_webhooks)
        system.replicas[name].process = start_webhooks()
    values = state / "values.json"
    chart = devenv.local_chart_values(webhook_proxy.port, cluster.ca_cert.read_text())
    values.write_text(json.dumps({**chart, "scheduler": {"config": scheduler_config}}))
    log("installing the chart (sluice's components run locally)")
    subprocess.run(
        [
            str(cluster.helm), f"--kubeconfig={cluster.kubeconfig}", "upgrade", "--install",
            RELEASE, str(repo / "charts" / "sluice"), "-n", NAMESPACE, "--create-namespace",
            "-f", str(values),
        ],
        text=True, capture_output=True, check=True,
    )  # fmt: skip
    for name in system.webhooks():
        replica = system.replicas[name]
        assert replica.process is not None
        port = webhook_ports["ab".index(name[-1])]
        devenv.wait_ready(port, cluster.ca_cert, replica.process, state / f"{name}.log")
    account = controlplane.service_account_kubeconfig(
        cluster, NAMESPACE, f"{RELEASE}-operator", state / "operator.kubeconfig", duration="24h"
    )
    api_port = int(cluster.server.rsplit(":", 1)[1])
    for identity in ("operator-a", "operator-b"):
        link = Proxy([api_port], identity)
        system.links[identity] = link
        kubeconfig = state / f"{identity}.kubeconfig"
        kubeconfig.write_text(
            account.read_text().replace(cluster.server, f"https://127.0.0.1:{link.port}")
        )

        def start_operator(
            identity: str = identity, kubeconfig: Path = kubeconfig
        ) -> subprocess.Popen[bytes]:
            return devenv.start_operator(
                kubeconfig,
                state / f"{identity}.log",
                f"--identity={identity}",
                f"--lease-name={LEASE}",
                f"--lease-seconds={LEASE_SECONDS}",
                "--health-port=0",
                "--metrics-port=0",
                "--dashboard-port=0",
            )

        system.replicas[identity] = Replica(identity, start_operator)
        system.replicas[identity].process = start_operator()
    system.supervise()
    return system
