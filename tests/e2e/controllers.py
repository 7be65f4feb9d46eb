"""The workload controllers as local processes on the living cluster: KubeRay's ray-operator,
Kubeflow's training-operator (PyTorchJob only), the JobSet controller and the MPI operator,
each built by hack/build-binaries from its published Go module (hack/tools/<name>).

Each one gets the CRDs of its release (read from the Go module cache, applied server-side),
what it needs locally (hack/README.md, *Workload controllers*), ports of its own, the admin
kubeconfig, and its log in the caller's directory. It dies with the pytest process, as the
control plane does, so an interrupted run leaves nothing behind.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from .helpers import Kubectl, controlplane, unique_name, wait_for

binaries = controlplane.binaries
KUBERAY = binaries.KUBERAY
TRAINING_OPERATOR = binaries.TRAINING_OPERATOR
JOBSET = binaries.JOBSET
MPI_OPERATOR = binaries.MPI_OPERATOR

# The training-operator's certificate rotator waits for this file, whatever its flags say
# (the path is fixed in its code); its webhook server reads its certificate from
# $TMPDIR/k8s-webhook-server/serving-certs, which each run points at its own directory.
ROTATOR_CERT = Path("/tmp/k8s-webhook-server/serving-certs/tls.crt")
# The MPI operator serves its health check on this port, whatever its flags say.
MPI_HEALTH_PORT = 8080
START_TIMEOUT = 60.0


@dataclass
class Running:
    """A controller process; stop() ends it (SIGTERM, then SIGKILL)."""

    controller: controlplane.Controller
    process: subprocess.Popen[bytes]
    log: Path
    crds: list[str] = field(default_factory=list)
    """The CRDs it was given, as `kind/name` for kubectl."""
    before_stop: list[Callable[[], object]] = field(default_factory=list)
    after_stop: list[Callable[[], object]] = field(default_factory=list)

    def alive(self) -> bool:
        return self.process.poll() is None

    def logs(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        for step in self.before_stop:
            step()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        for step in self.after_stop:
            step()


def install_crds(kubectl: Kubectl, controller: controlplane.Controller) -> list[str]:
    """Apply the controller's own CRDs (server-side: they are too big for the last-applied
    annotation) and wait until they are Established."""
    files = binaries.crd_files(controller)
    args = [a for f in files for a in ("-f", str(f))]
    out = kubectl.run("apply", "--server-side", "--force-conflicts", "-o", "name", *args)
    crds = out.split()

    def established() -> bool:
        # Not `kubectl wait`: a CRD just created has no conditions yet, which it refuses.
        listed = kubectl.json("get", *crds)
        items = listed.get("items", [listed])
        return all(
            any(
                c["type"] == "Established" and c["status"] == "True"
                for c in (crd.get("status") or {}).get("conditions") or []
            )
            for crd in items
        )

    wait_for(established, timeout=60, what=f"{controller.name}'s CRDs Established")
    return crds


def _spawn(
    controller: controlplane.Controller,
    args: Sequence[str],
    kubeconfig: Path,
    log: Path,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    binary = binaries.find_controller(controller)
    environment = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    environment.update(KUBECONFIG=str(kubeconfig), **(env or {}))
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(binary), *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environment,
            cwd=log.parent,
            start_new_session=True,  # a Ctrl-C in the terminal is pytest's to handle
            preexec_fn=controlplane.processes.set_parent_death_signal,
        )


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def _wait_ready(running: Running, ready: Any, what: str) -> None:
    def probe() -> bool:
        if not running.alive():
            raise AssertionError(
                f"{running.controller.name} exited ({running.process.returncode}) before it was"
                f" ready; end of {running.log}:\n{running.logs()[-4000:]}"
            )
        return bool(ready())

    try:
        wait_for(probe, timeout=START_TIMEOUT, interval=0.3, what=what)
    except BaseException:
        running.stop()
        raise


def start_kuberay(cluster: controlplane.Cluster, kubectl: Kubectl, workdir: Path) -> Running:
    """KubeRay's ray-operator: RayCluster, RayJob and RayService controllers, no webhook."""
    crds = install_crds(kubectl, KUBERAY)
    health = controlplane.cluster.free_port()
    args = [
        "--enable-leader-election=false",
        f"--metrics-addr=127.0.0.1:{controlplane.cluster.free_port()}",
        f"--health-probe-bind-address=127.0.0.1:{health}",
        "--log-stdout-encoder=console",
    ]
    log = workdir / "kuberay.log"
    running = Running(KUBERAY, _spawn(KUBERAY, args, cluster.kubeconfig, log), log, crds)
    _wait_ready(running, lambda: _answers(f"http://127.0.0.1:{health}/readyz"), "KubeRay ready")
    return running


def start_training_operator(
    cluster: controlplane.Cluster, kubectl: Kubectl, workdir: Path, namespace: str = "kubeflow"
) -> Running:
    """Kubeflow's training-operator with only its PyTorchJob scheme: the others would need
    their CRDs, and its MPIJob (kubeflow.org/v1) is the MPI operator's CRD name too.

    Its certificate rotator keeps a CA and a serving certificate in a Secret of its namespace,
    which must exist (empty is enough: it fills it), then waits for ROTATOR_CERT to exist and
    for the Secret to be reconciled. Its webhook server (not registered with the API server
    here) serves a certificate from the cluster CA out of this run's own TMPDIR."""
    crds = install_crds(kubectl, TRAINING_OPERATOR)
    kubectl.run("create", "namespace", namespace, check=False)
    secret = "training-operator-webhook-cert"
    kubectl.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": secret, "namespace": namespace},
            "type": "Opaque",
        }
    )
    tmp = workdir / "training-operator-tmp"
    serving = tmp / "k8s-webhook-server" / "serving-certs"
    serving.mkdir(parents=True, exist_ok=True)
    controlplane.issue_serving_cert(cluster, serving)
    if not ROTATOR_CERT.exists():
        # Only looked at, never read: any certificate will do. Shared by every run on this
        # machine, so made whole or not at all, and left in place.
        ROTATOR_CERT.parent.mkdir(parents=True, exist_ok=True)
        partial = ROTATOR_CERT.with_name(f".tls.crt.{os.getpid()}")
        partial.write_bytes((serving / "tls.crt").read_bytes())
        partial.replace(ROTATOR_CERT)
    health = controlplane.cluster.free_port()
    args = [
        "--enable-scheme=pytorchjob",
        "--leader-elect=false",
        f"--metrics-bind-address=127.0.0.1:{controlplane.cluster.free_port()}",
        f"--health-probe-bind-address=127.0.0.1:{health}",
        f"--webhook-server-port={controlplane.cluster.free_port()}",
        f"--webhook-secret-name={secret}",
    ]
    env = {"MY_POD_NAMESPACE": namespace, "TMPDIR": str(tmp)}
    log = workdir / "training-operator.log"
    process = _spawn(TRAINING_OPERATOR, args, cluster.kubeconfig, log, env)
    running = Running(TRAINING_OPERATOR, process, log, crds)
    _wait_ready(
        running,
        lambda: _answers(f"http://127.0.0.1:{health}/readyz"),
        "the training-operator ready (certificates in place, webhook server listening)",
    )
    return running


def jobset_webhook_configurations(port: int, ca_bundle: bytes) -> list[dict[str, Any]]:
    """The JobSet release's webhook configurations (config/components/webhook, with the pod
    webhooks narrowed to JobSet's pods as its kustomization does), pointing at 127.0.0.1."""
    manifests = binaries.module_source(JOBSET) / "config/components/webhook/manifests.yaml"
    configs = [d for d in yaml.safe_load_all(manifests.read_text()) if d]
    bundle = base64.b64encode(ca_bundle).decode()
    for config in configs:
        config["metadata"] = {"name": f"jobset-e2e-{config['kind'].lower()}"}
        for hook in config["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
            if hook["rules"][0]["resources"] == ["pods"]:
                hook["objectSelector"] = {
                    "matchExpressions": [
                        {"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}
                    ]
                }
    return configs


def start_jobset(cluster: controlplane.Cluster, kubectl: Kubectl, workdir: Path) -> Running:
    """The JobSet controller, its internal certificate management off (a Configuration file
    says so, and where its webhook server listens and finds its certificate), its webhooks
    registered as the release registers them: JobSets are defaulted and validated by it."""
    crds = install_crds(kubectl, JOBSET)
    certs = workdir / "jobset-certs"
    certs.mkdir(exist_ok=True)
    controlplane.issue_serving_cert(cluster, certs)
    health, webhook = controlplane.cluster.free_port(), controlplane.cluster.free_port()
    config = workdir / "jobset-config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
                "kind": "Configuration",
                "leaderElection": {"leaderElect": False},
                "internalCertManagement": {"enable": False},
                "webhook": {"port": webhook, "host": "127.0.0.1", "certDir": str(certs)},
                "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
                "metrics": {"bindAddress": "0"},
            }
        )
    )
    args = [f"--config={config}", "--metrics-bind-address=0", "--leader-elect=false"]
    log = workdir / "jobset.log"
    configs = jobset_webhook_configurations(webhook, cluster.ca_cert.read_bytes())

    def unregister() -> None:
        for c in configs:
            kind = str(c["kind"]).lower()
            kubectl.run("delete", kind, c["metadata"]["name"], "--ignore-not-found")

    running = Running(JOBSET, _spawn(JOBSET, args, cluster.kubeconfig, log), log, crds)
    _wait_ready(running, lambda: _answers(f"http://127.0.0.1:{health}/readyz"), "JobSet ready")
    # Gone before the process is: a webhook with no server refuses every JobSet and its pods.
    running.before_stop.append(unregister)
    for c in configs:
        kubectl.apply(c)
    return running


def start_mpi_operator(cluster: controlplane.Cluster, kubectl: Kubectl, workdir: Path) -> Running:
    """The MPI operator (MPIJob v2beta1). It always elects a leader (no flag turns that off):
    each start gets a lock namespace of its own, so it leads at once. Its health check is on
    port 8080 whatever the flags say, so one at a time on this machine (a file lock)."""
    crds = install_crds(kubectl, MPI_OPERATOR)
    lock_namespace = unique_name("mpi-operator")
    kubectl.run("create", "namespace", lock_namespace)
    lock_file = _machine_lock(f"mpi-operator-{MPI_HEALTH_PORT}")
    args = [
        f"--lock-namespace={lock_namespace}",
        "--kube-api-qps=50",
        "--kube-api-burst=100",
    ]
    log = workdir / "mpi-operator.log"
    try:
        process = _spawn(MPI_OPERATOR, args, cluster.kubeconfig, log)
    except BaseException:
        lock_file.close()
        raise
    running = Running(MPI_OPERATOR, process, log, crds, after_stop=[lock_file.close])

    def leading() -> bool:
        lease = kubectl.run(
            "get",
            "lease",
            "mpi-operator",
            "-n",
            lock_namespace,
            "--ignore-not-found",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        )
        return bool(lease) and _answers(f"http://127.0.0.1:{MPI_HEALTH_PORT}/healthz")

    _wait_ready(running, leading, "the MPI operator leading and healthy")
    return running


def _machine_lock(name: str) -> IO[str]:
    """An exclusive lock shared by every checkout on this machine (waits for it)."""
    directory = binaries.cache_root() / "locks"
    directory.mkdir(parents=True, exist_ok=True)
    handle: IO[str] = (directory / f"{name}.lock").open("w")
    deadline = time.monotonic() + 300
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if time.monotonic() > deadline:
                handle.close()
                held = directory / f"{name}.lock"
                raise AssertionError(f"{held} held for 300s by another run") from None
            time.sleep(0.5)


STARTERS = {
    KUBERAY.name: start_kuberay,
    TRAINING_OPERATOR.name: start_training_operator,
    JOBSET.name: start_jobset,
    MPI_OPERATOR.name: start_mpi_operator,
}


@contextlib.contextmanager
def running(
    controller: controlplane.Controller,
    cluster: controlplane.Cluster,
    kubectl: Kubectl,
    workdir: Path,
) -> Iterator[Running]:
    process = STARTERS[controller.name](cluster, kubectl, workdir)
    try:
        yield process
    finally:
        process.stop()


def strip(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as the API server returned it, without managedFields (noise to a reader)."""
    copy: dict[str, Any] = json.loads(json.dumps(obj))
    copy.get("metadata", {}).pop("managedFields", None)
    return copy
