"""sluice's own processes on the e2e control plane: the webhook server (and its registration
with the API server through webhook configurations pointing at 127.0.0.1)."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
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
    log = (workdir / "webhooks.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sluice.cli.main",
            "webhooks",
            "serve",
            "--host=127.0.0.1",
            f"--port={port}",
            f"--tls-cert-file={cert}",
            f"--tls-key-file={key}",
            f"--kubeconfig={cluster.kubeconfig}",
            f"--operator-user={OPERATOR_USER}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    context = ssl.create_default_context(cafile=str(cluster.ca_cert))
    deadline = time.monotonic() + 30
    try:
        while True:
            if process.poll() is not None:
                raise AssertionError(
                    f"webhook server exited: {(workdir / 'webhooks.log').read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(
                    f"https://127.0.0.1:{port}/readyz", context=context, timeout=2
                ) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("webhook server not ready within 30s")
            time.sleep(0.2)
        yield port
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


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
        namespace: str = "sluice-system",
        lease_seconds: int = 15,
    ) -> None:
        self.log_path = workdir / f"operator-{identity}.log"
        self.identity = identity
        log = self.log_path.open("a")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sluice.cli.main",
                "operator",
                "run",
                f"--kubeconfig={cluster.kubeconfig}",
                f"--namespace={namespace}",
                f"--lease-name={lease_name}",
                f"--identity={identity}",
                f"--lease-seconds={lease_seconds}",
                "--health-port=0",
                "--metrics-port=0",
                "--resync-seconds=2",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()

    @classmethod
    def with_kubeconfig(
        cls, cluster: controlplane.Cluster, kubeconfig: Path, workdir: Path, identity: str
    ) -> Operator:
        """An operator acting as whoever the kubeconfig names (e.g. the chart's account)."""
        op = cls.__new__(cls)
        op.identity = identity
        op.log_path = workdir / f"operator-{identity}.log"
        log = op.log_path.open("a")
        op.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sluice.cli.main",
                "operator",
                "run",
                f"--kubeconfig={kubeconfig}",
                "--namespace=sluice-system",
                f"--lease-name=lease-{identity}",
                f"--identity={identity}",
                "--health-port=0",
                "--metrics-port=0",
                "--resync-seconds=2",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()
        return op

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
