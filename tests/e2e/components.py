"""sluice's own processes on the e2e control plane: the webhook server (and its registration
with the API server through webhook configurations pointing at 127.0.0.1)."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import devenv

from .helpers import Kubectl, controlplane

free_port = devenv.free_port

OPERATOR_USER = devenv.OPERATOR_USER


def webhook_configurations(port: int, ca_bundle: bytes) -> list[dict[str, object]]:
    """The same configurations `make dev-up` registers (hack/devenv.py), named for the tests."""
    return devenv.webhook_configurations(port, ca_bundle, name="sluice-e2e")


@contextmanager
def webhook_server(cluster: controlplane.Cluster, workdir: Path) -> Iterator[int]:
    """`sluice webhooks serve` as a process, ready (Queue cache synced) when this yields."""
    cert, key = controlplane.issue_serving_cert(cluster, workdir)
    port = free_port()
    log = workdir / "webhooks.log"
    process = devenv.start_webhooks(cluster.kubeconfig, cert, key, port, log)
    try:
        devenv.wait_ready(port, cluster.ca_cert, process, log)
        yield port
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()


@contextmanager
def registered_webhooks(kubectl: Kubectl, port: int, ca_bundle: bytes) -> Iterator[None]:
    configs = webhook_configurations(port, ca_bundle)
    for config in configs:
        kubectl.apply(config)
    try:
        yield
    finally:
        for config in configs:
            kubectl.run("delete", str(config["kind"]).lower(), "sluice-e2e", "--ignore-not-found")


class Operator:
    """`sluice operator run` as a process; kill() is a crash (SIGKILL), stop() a clean exit."""

    def __init__(
        self,
        cluster: controlplane.Cluster,
        workdir: Path,
        identity: str,
        lease_name: str = "sluice-operator",
        lease_seconds: int = 15,
        kubeconfig: Path | None = None,
    ) -> None:
        self.identity = identity
        self.log_path = workdir / f"operator-{identity}.log"
        self.process = devenv.start_operator(
            kubeconfig or cluster.kubeconfig,
            self.log_path,
            f"--lease-name={lease_name}",
            f"--identity={identity}",
            f"--lease-seconds={lease_seconds}",
            "--health-port=0",
            "--metrics-port=0",
            "--resync-seconds=2",
        )

    @classmethod
    def with_kubeconfig(
        cls, cluster: controlplane.Cluster, kubeconfig: Path, workdir: Path, identity: str
    ) -> Operator:
        """An operator acting as whoever the kubeconfig names (e.g. the chart's account)."""
        return cls(
            cluster, workdir, identity, lease_name=f"lease-{identity}", kubeconfig=kubeconfig
        )

    def logs(self) -> str:
        return self.log_path.read_text()

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
