"""sluice's own processes on the e2e control plane: the webhook server (and its registration
with the API server through webhook configurations pointing at 127.0.0.1)."""

from __future__ import annotations

import asyncio
import signal
import ssl
import subprocess
import threading
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import devenv

from sluice.api.workloads import Adapter
from sluice.kube import api_client
from sluice.webhooks.cache import KubeFacts, QueueCache
from sluice.webhooks.handlers import Context
from sluice.webhooks.server import serve
from sluice.webhooks.tls import ReloadingTLS

from .helpers import (
    Kubectl,
    KubectlError,
    controlplane,
    queue,
    unique_name,
    wait_for,
    wait_for_reserved_queues,
)

free_port = devenv.free_port

OPERATOR_USER = devenv.OPERATOR_USER


def webhook_configurations(
    port: int, ca_bundle: bytes, workloads: Sequence[Adapter] = ()
) -> list[dict[str, object]]:
    """The same configurations `make dev-up` registers (hack/devenv.py), named for the tests;
    with ``workloads``, those kinds' rules too."""
    kinds = [(a.group, a.plural) for a in workloads]
    scaled = [a.plural for a in workloads if a.scale_replicas]
    return devenv.webhook_configurations(
        port, ca_bundle, name="sluice-e2e", workloads=kinds, scaled=scaled
    )


def workload_kind_args(workloads: Sequence[Adapter]) -> list[str]:
    """--workload-kind for Job and each of these kinds, as the chart passes them."""
    return [f"--workload-kind={k}" for k in ("Job", *(a.kind for a in workloads))]


@contextmanager
def webhook_server(
    cluster: controlplane.Cluster, workdir: Path, workloads: Sequence[Adapter] = ()
) -> Iterator[int]:
    """`sluice webhooks serve` as a process, ready (Queue cache synced) when this yields."""
    cert, key = controlplane.issue_serving_cert(cluster, workdir)
    port = free_port()
    log = workdir / "webhooks.log"
    extra = workload_kind_args(workloads) if workloads else []
    process = devenv.start_webhooks(cluster.kubeconfig, cert, key, port, log, *extra)
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
def held_webhook_server(
    cluster: controlplane.Cluster, kubectl: Kubectl, workdir: Path
) -> Iterator[tuple[int, QueueCache]]:
    """sluice's webhook server in this process, over the real API server, its Queue cache
    filled once from a listing and then held: it never sees a queue created after it started,
    as a watch a moment behind the API server has not yet. Yields its port and its cache."""
    cert, key = controlplane.issue_serving_cert(cluster, workdir)
    cache = QueueCache()
    cache.replace(kubectl.json("get", "queues")["items"])
    ctx = Context(
        cache=cache,
        facts=KubeFacts(api_client(str(cluster.kubeconfig))),
        operator_users=frozenset({OPERATOR_USER}),
    )
    port = free_port()
    running: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def main() -> None:
        stop = asyncio.Event()
        running.append((asyncio.get_running_loop(), stop))
        await serve(ctx, "127.0.0.1", port, ReloadingTLS(cert, key), stop, shutdown_timeout=2)

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    context = ssl.create_default_context(cafile=str(cluster.ca_cert))

    def ready() -> bool:
        try:
            url = f"https://127.0.0.1:{port}/readyz"
            with urllib.request.urlopen(url, context=context, timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    try:
        wait_for(ready, timeout=30, what="the held webhook server ready")
        yield port, cache
    finally:
        for loop, stop in running:
            loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=15)


@contextmanager
def registered_webhooks(
    kubectl: Kubectl, port: int, ca_bundle: bytes, workloads: Sequence[Adapter] = ()
) -> Iterator[None]:
    configs = webhook_configurations(port, ca_bundle, workloads)
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
        dashboard_port: int = 0,
        extra: Sequence[str] = (),
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
            f"--dashboard-port={dashboard_port}",
            "--resync-seconds=2",
            *extra,
        )

    @classmethod
    def with_kubeconfig(
        cls,
        cluster: controlplane.Cluster,
        kubeconfig: Path,
        workdir: Path,
        identity: str,
        dashboard_port: int = 0,
        lease_name: str = "",
        extra: Sequence[str] = (),
    ) -> Operator:
        """An operator acting as whoever the kubeconfig names (e.g. the chart's account), on
        its own Lease unless told which."""
        return cls(
            cluster,
            workdir,
            identity,
            lease_name=lease_name or f"lease-{identity}",
            kubeconfig=kubeconfig,
            dashboard_port=dashboard_port,
            extra=extra,
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


def refused_by_sluice(kubectl: Kubectl) -> bool:
    """Whether the API server already sends Queues to the webhooks (it picks up new
    configurations asynchronously): a queue under a missing parent is then refused."""
    probe = queue(unique_name("probe"), parent="nowhere")
    try:
        kubectl.create(probe)
    except KubectlError as err:
        return "does not exist" in str(err)
    kubectl.delete("queue", probe["metadata"]["name"])
    return False


@contextmanager
def sluice_system(
    cluster: controlplane.Cluster,
    kubectl: Kubectl,
    workdir: Path,
    identity: str,
    dashboard_port: int = 0,
    workloads: Sequence[Adapter] = (),
) -> Iterator[Operator]:
    """The operator (acting as its service account, the identity the webhooks let un-suspend
    and annotate jobs) and the registered webhooks: sluice as a tenant meets it. With
    ``workloads``, both gate those kinds besides Job."""
    kubectl.run("create", "namespace", "sluice-system", check=False)
    kubectl.run(
        "create",
        "clusterrolebinding",
        f"e2e-{identity}",
        "--clusterrole=cluster-admin",
        "--serviceaccount=sluice-system:sluice-operator",
        check=False,
    )
    account = controlplane.service_account_kubeconfig(cluster, "sluice-system", "sluice-operator")
    extra = workload_kind_args(workloads) if workloads else []
    op = Operator.with_kubeconfig(cluster, account, workdir, identity, dashboard_port, extra=extra)
    try:
        wait_for_reserved_queues(kubectl)
        with (
            webhook_server(cluster, workdir, workloads) as port,
            registered_webhooks(kubectl, port, cluster.ca_cert.read_bytes(), workloads),
        ):
            wait_for(lambda: refused_by_sluice(kubectl), timeout=20, what="the webhooks active")
            yield op
    finally:
        op.stop()
        # The chart's own install (test_chart.py) creates this account and binding's namesake:
        # what this made for the operator goes with it, whichever test runs next.
        kubectl.run("delete", "clusterrolebinding", f"e2e-{identity}", check=False)
        kubectl.run(
            "delete", "serviceaccount", "sluice-operator", "-n", "sluice-system", check=False
        )
