"""Start and stop a local Kubernetes cluster on 127.0.0.1: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, and KWOK playing the kubelet on fake nodes.

A cluster lives in a state directory (`<repo>/.cluster` for `make cluster-up`,
a temporary one for the pytest fixture):

    state.json        ports, pids, data dir: what `down` needs to clean up
    kubeconfig        admin (system:masters) credentials
    ca.crt            the cluster CA: put it in a webhook's caBundle
    pki/              CA key, serving and client certificates, service-account keys
    components/       each component's kubeconfig (its own identity) and configuration
    logs/             etcd.log, kube-apiserver.log, kube-controller-manager.log,
                      kube-scheduler.log, kwok.log

`up` is idempotent (a healthy cluster is reused, a stale one is cleaned first)
and a failed start stops whatever it had started. The pids are written before
waiting for readiness, so even a start killed half-way is cleaned by the next
`up` or `down`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import binaries, components, kubeconfig, processes
from .processes import log as _log

START_TIMEOUT = float(os.environ.get("SLUICE_CONTROLPLANE_START_TIMEOUT", "90"))
ADMIN_USER = "sluice-admin"
SERVICE_CIDR = "10.0.0.0/24"
LOOPBACK = "127.0.0.1"

# In start order; stopped in reverse. The last three make the cluster live: without them
# nothing creates, schedules or runs a pod.
PROCESSES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
_CLIENTS = {
    "kube-controller-manager": components.CONTROLLER_MANAGER_USER,
    "kube-scheduler": components.SCHEDULER_USER,
    "kwok": components.KWOK_USER,
}


class ControlPlaneError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


@dataclass
class State:
    """What is persisted in state.json about a (possibly half-started) cluster."""

    bin_dir: str
    data_dir: str
    etcd_port: int
    etcd_peer_port: int
    api_port: int
    # Defaults: a state.json written before these existed still reads, and is cleaned up.
    controller_manager_port: int = 0
    scheduler_port: int = 0
    kwok_port: int = 0
    pids: dict[str, int] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)

    @property
    def server(self) -> str:
        return f"https://{LOOPBACK}:{self.api_port}"


@dataclass(frozen=True)
class Cluster:
    """A running cluster, as tests and scripts see it."""

    state_dir: Path
    server: str
    bin_dir: Path

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def ca_cert(self) -> Path:
        return self.state_dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.state_dir / "pki" / "ca.key"

    @property
    def kubectl(self) -> Path:
        return self.bin_dir / "kubectl"

    @property
    def helm(self) -> Path:
        return self.bin_dir / "helm"

    @property
    def logs(self) -> Path:
        return self.state_dir / "logs"

    def env(self) -> dict[str, str]:
        """Environment for a subprocess that should talk to this cluster."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}


class ControlPlane:
    """The whole local cluster, whose state lives in `state_dir`."""

    def __init__(
        self,
        state_dir: Path,
        *,
        tie_to_parent: bool = False,
        data_root: Path | None = None,
        apiserver_args: tuple[str, ...] = (),
        leave_out: tuple[str, ...] = (),
    ) -> None:
        """tie_to_parent: the processes die with this one (for test fixtures).
        data_root: where etcd's temporary data dir goes (default: the system's temp dir).
        apiserver_args: more flags for kube-apiserver (e.g. an audit log).
        leave_out: living processes not to start (e.g. a benchmark whose measure the
        controller manager takes no part in, at a size where its memory does not fit).
        """
        unknown = set(leave_out) - set(PROCESSES[2:])
        if unknown:
            raise ControlPlaneError(
                f"cannot leave out {sorted(unknown)}: only {', '.join(PROCESSES[2:])} can be"
            )
        self.state_dir = Path(state_dir).resolve()
        self.tie_to_parent = tie_to_parent
        self.data_root = data_root
        self.apiserver_args = apiserver_args
        self.leave_out = leave_out
        # Processes this object started, by pid: their exit is known without /proc.
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    # paths
    @property
    def _state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def _pki(self) -> Path:
        return self.state_dir / "pki"

    @property
    def _logs(self) -> Path:
        return self.state_dir / "logs"

    @property
    def _components(self) -> Path:
        return self.state_dir / "components"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with (self.state_dir / ".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read_state(self) -> State | None:
        try:
            return State(**json.loads(self._state_file.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def _write_state(self, state: State) -> None:
        tmp = self._state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=2) + "\n")
        tmp.replace(self._state_file)

    def _cluster(self, state: State) -> Cluster:
        return Cluster(self.state_dir, state.server, Path(state.bin_dir))

    # health
    def _ssl_context(self, admin: bool = True) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.state_dir / "ca.crt"))
        if admin:
            context.load_cert_chain(str(self._pki / "admin.crt"), str(self._pki / "admin.key"))
        return context

    def _answers(self, url: str, admin: bool = True, timeout: float = 2.0) -> bool:
        context = self._ssl_context(admin) if url.startswith("https:") else None
        try:
            with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
                return bool(response.status == 200)
        except (OSError, ssl.SSLError, ValueError):
            return False

    def _readyz(self, state: State) -> bool:
        return self._answers(f"{state.server}/readyz")

    @staticmethod
    def _etcd_healthy(state: State) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://{LOOPBACK}:{state.etcd_port}/health", timeout=2.0
            ) as response:
                return bool(json.loads(response.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def _running(self, state: State) -> bool:
        bin_dir = Path(state.bin_dir)
        return all(
            name in state.pids and processes.is_ours(state.pids[name], bin_dir / name)
            for name in PROCESSES
            if name not in state.left_out
        )

    def status(self) -> Cluster | None:
        """The cluster if every process runs and the API server answers /readyz, else None."""
        state = self._read_state()
        if state is None or not self._running(state) or not self._readyz(state):
            return None
        return self._cluster(state)

    # lifecycle
    def up(self) -> Cluster:
        with self._locked(), self._signals_raise():
            existing = self._read_state()
            if existing is not None:
                if self._running(existing) and self._readyz(existing):
                    _log(f"reusing the running cluster at {existing.server}")
                    return self._cluster(existing)
                _log("found a stale or half-started cluster; cleaning it up first")
                self._teardown(existing)
            found = binaries.find_binaries()
            bin_dir = found["kube-apiserver"].parent
            for attempt in (1, 2, 3):
                try:
                    return self._start(bin_dir)
                except _PortTaken as error:
                    _log(f"port clash on attempt {attempt} ({error}); retrying with new ports")
            raise ControlPlaneError("could not find free ports after 3 attempts")

    def down(self) -> bool:
        """Stop the cluster; True when there was something to stop."""
        with self._locked(), self._signals_raise():
            state = self._read_state()
            if state is None:
                return False
            self._teardown(state)
            return True

    @staticmethod
    @contextlib.contextmanager
    def _signals_raise() -> Iterator[None]:
        """Turn SIGTERM/SIGHUP into an exception so a killed start still cleans up."""

        def handler(signum: int, _frame: object) -> None:
            raise KeyboardInterrupt(f"signal {signum}")

        if threading_is_main():
            previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
            try:
                yield
            finally:
                for s, h in previous.items():
                    signal.signal(s, h)
        else:
            yield

    def _teardown(self, state: State) -> None:
        bin_dir = Path(state.bin_dir)

        def running(names: tuple[str, ...]) -> list[processes.Running]:
            return [
                processes.Running(
                    name,
                    state.pids[name],
                    bin_dir / name,
                    self._children.pop(state.pids[name], None),
                )
                for name in names
                if name in state.pids
            ]

        # The API server's clients together, then the API server, then etcd: each goes before
        # what it talks to, so none logs a storm of connection errors.
        processes.stop(running(PROCESSES[2:]))
        processes.stop(running(("kube-apiserver",)))
        processes.stop(running(("etcd",)))
        if state.data_dir and Path(state.data_dir).name.startswith("sluice-etcd-"):
            shutil.rmtree(state.data_dir, ignore_errors=True)
        for path in (self._state_file, self.state_dir / "kubeconfig", self.state_dir / "ca.crt"):
            path.unlink(missing_ok=True)
        shutil.rmtree(self._pki, ignore_errors=True)
        shutil.rmtree(self._components, ignore_errors=True)

    def _spawn(
        self, name: str, command: list[str], env: dict[str, str], mode: str = "w"
    ) -> int:
        self._logs.mkdir(parents=True, exist_ok=True)
        with (self._logs / f"{name}.log").open(mode) as log:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.state_dir,
                start_new_session=True,  # a Ctrl-C in the shell must not hit them directly
                preexec_fn=processes.set_parent_death_signal if self.tie_to_parent else None,
            )
        self._children[process.pid] = process
        return process.pid

    def _start(self, bin_dir: Path) -> Cluster:
        started = time.monotonic()
        state = State(
            bin_dir=str(bin_dir),
            data_dir=tempfile.mkdtemp(prefix="sluice-etcd-", dir=self.data_root),
            etcd_port=free_port(),
            etcd_peer_port=free_port(),
            api_port=free_port(),
            controller_manager_port=free_port(),
            scheduler_port=free_port(),
            kwok_port=free_port(),
            left_out=list(self.leave_out),
        )
        self._write_state(state)
        try:
            self._write_pki(state)
            self._write_component_config()
            env = self._env(self.state_dir)
            self._launch(state, "etcd", self._etcd_command(state), env)
            self._wait("etcd", state, lambda: self._etcd_healthy(state))
            self._launch(state, "kube-apiserver", self._apiserver_command(state), env)
            self._wait("kube-apiserver", state, lambda: self._readyz(state))
            self._create(state, components.kwok_rbac())
            living = [name for name in PROCESSES[2:] if name not in state.left_out]
            for name in living:
                self._launch(state, name, self._living_command(state, name), env)
            for name in living:
                url = self._health_url(state, name)
                self._wait(name, state, lambda url=url: self._answers(url, admin=False))
        except BaseException:
            self._teardown(state)
            raise
        cluster = self._cluster(state)
        _log(f"cluster ready at {state.server} in {time.monotonic() - started:.1f}s")
        return cluster

    def _launch(
        self, state: State, name: str, command: list[str], env: dict[str, str], mode: str = "w"
    ) -> None:
        state.pids[name] = self._spawn(name, command, env, mode)
        self._write_state(state)

    @staticmethod
    def _env(state_dir: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        # KWOK would also read ~/.kwok/kwok.yaml; keep it to the stages given here.
        env["KWOK_WORKDIR"] = str(state_dir / "components" / "kwok")
        return env

    def pid(self, name: str) -> int:
        """The pid of one of the running cluster's processes (for fault injection)."""
        state = self._read_state()
        if state is None or name not in state.pids:
            raise ControlPlaneError(f"no {name} in {self._state_file}")
        return state.pids[name]

    def relaunch(self, name: str) -> None:
        """Start one process of a running cluster again, with the same ports and flags (after
        it was killed or stopped), and wait until it is ready; its log is appended to."""
        with self._locked():
            state = self._read_state()
            if state is None:
                raise ControlPlaneError(f"no cluster in {self.state_dir}")
            old = state.pids.get(name)
            if old is not None:
                processes.reap(old)
                self._children.pop(old, None)
            if name == "etcd":
                command = self._etcd_command(state)
            elif name == "kube-apiserver":
                command = self._apiserver_command(state)
            else:
                command = self._living_command(state, name)
            self._launch(state, name, command, self._env(self.state_dir), mode="a")
            if name == "etcd":
                ready: Callable[[], bool] = lambda: self._etcd_healthy(state)  # noqa: E731
            elif name == "kube-apiserver":
                ready = lambda: self._readyz(state)  # noqa: E731
            else:
                url = self._health_url(state, name)
                ready = lambda: self._answers(url, admin=False)  # noqa: E731
            self._wait(name, state, ready)

    def _wait(self, name: str, state: State, ready: Callable[[], bool]) -> None:
        binary = Path(state.bin_dir) / name
        deadline = time.monotonic() + START_TIMEOUT
        log = self._logs / f"{name}.log"
        while time.monotonic() < deadline:
            if ready():
                return
            child = self._children.get(state.pids[name])
            if (
                child.poll() is not None
                if child
                else not processes.is_ours(state.pids[name], binary)
            ):
                text = processes.tail(log)
                if "address already in use" in text:
                    raise _PortTaken(f"{name}: address already in use")
                raise ControlPlaneError(f"{name} exited during start; end of {log}:\n{text}")
            time.sleep(0.1)
        raise ControlPlaneError(
            f"{name} not ready after {START_TIMEOUT:.0f}s; end of {log}:\n{processes.tail(log)}"
        )

    def _create(self, state: State, objects: list[dict[str, Any]]) -> None:
        """POST RBAC objects as the admin (no kubectl process: it would cost start time)."""
        for obj in objects:
            namespace = obj["metadata"].get("namespace")
            scope = f"/namespaces/{namespace}" if namespace else ""
            url = f"{state.server}/apis/{obj['apiVersion']}{scope}/{obj['kind'].lower()}s"
            deadline = time.monotonic() + 10
            while True:
                request = urllib.request.Request(
                    url,
                    data=json.dumps(obj).encode(),
                    headers={"Content-Type": "application/json"},
                    method="POST",
                )
                try:
                    with urllib.request.urlopen(request, timeout=10, context=self._ssl_context()):
                        break
                except urllib.error.HTTPError as error:
                    if error.code == 409:  # already there: a retried start
                        break
                    # 404: the API server creates kube-node-lease just after it is ready.
                    if error.code != 404 or time.monotonic() > deadline:
                        detail = error.read().decode(errors="replace")
                        raise ControlPlaneError(f"creating {obj['kind']}: {detail}") from error
                time.sleep(0.1)

    def _health_url(self, state: State, name: str) -> str:
        return {
            "kube-controller-manager": f"https://{LOOPBACK}:{state.controller_manager_port}/healthz",
            "kube-scheduler": f"https://{LOOPBACK}:{state.scheduler_port}/readyz",
            "kwok": f"http://{LOOPBACK}:{state.kwok_port}/healthz",
        }[name]

    def _component_kubeconfig(self, name: str) -> Path:
        return self._components / f"{name}.kubeconfig"

    def _write_pki(self, state: State) -> None:
        from . import pki

        self._pki.mkdir(parents=True, exist_ok=True)
        ca = pki.CertificateAuthority.create()
        ca.write(self._pki / "ca.crt", self._pki / "ca.key")
        (self.state_dir / "ca.crt").write_bytes(ca.cert_pem)
        serving = ca.issue_serving(
            (
                LOOPBACK,
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "10.0.0.1",
            )
        )
        serving.write(self._pki / "apiserver.crt", self._pki / "apiserver.key")
        admin = ca.issue_client(ADMIN_USER, ["system:masters"])
        admin.write(self._pki / "admin.crt", self._pki / "admin.key")
        pki.service_account_key_pair().write(self._pki / "sa.pub", self._pki / "sa.key")
        kubeconfig.write(
            self.state_dir / "kubeconfig",
            kubeconfig.render(
                state.server,
                ca.cert_pem,
                ADMIN_USER,
                client_cert_pem=admin.cert_pem,
                client_key_pem=admin.key_pem,
            ),
        )
        for name, user in _CLIENTS.items():
            client = ca.issue_client(user)
            kubeconfig.write(
                self._component_kubeconfig(name),
                kubeconfig.render(
                    state.server,
                    ca.cert_pem,
                    user,
                    client_cert_pem=client.cert_pem,
                    client_key_pem=client.key_pem,
                ),
            )
        for name in ("kube-controller-manager", "kube-scheduler"):
            ca.issue_serving((LOOPBACK, "localhost")).write(
                self._pki / f"{name}-serving.crt", self._pki / f"{name}-serving.key"
            )

    def _write_component_config(self) -> None:
        (self._components / "kube-scheduler.yaml").write_text(
            components.scheduler_configuration(self._component_kubeconfig("kube-scheduler"))
        )

    def _living_command(self, state: State, name: str) -> list[str]:
        binary = Path(state.bin_dir) / name
        kubeconfig_path = self._component_kubeconfig(name)
        cert, key = self._pki / f"{name}-serving.crt", self._pki / f"{name}-serving.key"
        ca = self._pki / "ca.crt"
        if name == "kube-controller-manager":
            return components.controller_manager_command(
                binary, state.controller_manager_port, kubeconfig_path, ca, cert, key
            )
        if name == "kube-scheduler":
            return components.scheduler_command(
                binary,
                state.scheduler_port,
                self._components / "kube-scheduler.yaml",
                kubeconfig_path,
                ca,
                cert,
                key,
            )
        return components.kwok_command(binary, state.kwok_port, kubeconfig_path)

    def _etcd_command(self, state: State) -> list[str]:
        client = f"http://{LOOPBACK}:{state.etcd_port}"
        peer = f"http://{LOOPBACK}:{state.etcd_peer_port}"
        return [
            str(Path(state.bin_dir) / "etcd"),
            "--name=sluice",
            f"--data-dir={state.data_dir}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=sluice={peer}",
            "--unsafe-no-fsync=true",  # throw-away data: durability costs seconds per test
            # etcd's largest supported backend, not its 2 GiB default: hundreds of thousands
            # of stored Jobs (the operator's scale benchmark) outgrow the default, and etcd
            # then refuses every write.
            f"--quota-backend-bytes={8 * 2**30}",
            "--log-level=warn",
        ]

    def _apiserver_command(self, state: State) -> list[str]:
        p = self._pki
        return [
            str(Path(state.bin_dir) / "kube-apiserver"),
            f"--etcd-servers=http://{LOOPBACK}:{state.etcd_port}",
            f"--bind-address={LOOPBACK}",
            f"--advertise-address={LOOPBACK}",
            f"--secure-port={state.api_port}",
            f"--tls-cert-file={p / 'apiserver.crt'}",
            f"--tls-private-key-file={p / 'apiserver.key'}",
            f"--client-ca-file={p / 'ca.crt'}",
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={p / 'sa.pub'}",
            f"--service-account-signing-key-file={p / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # Both are on by default; listed because sluice's webhooks depend on them.
            "--enable-admission-plugins=MutatingAdmissionWebhook,ValidatingAdmissionWebhook",
            # No service-account controller runs to create each namespace's `default`
            # ServiceAccount, so Pods would be refused; nothing here reads their tokens.
            "--disable-admission-plugins=ServiceAccount",
            # Nothing here serves the `kubernetes` Service; do not reconcile its endpoints.
            "--endpoint-reconciler-type=none",
            "--allow-privileged=true",
            "--profiling=false",
            # PodTemplates, which nothing here uses, are watched straight from etcd: a watch
            # from a version etcd has compacted gets the 410 Gone any resource gets once the
            # API server's cache has moved past it (tests/e2e/test_list_watch.py).
            "--watch-cache-sizes=podtemplates#0",
            *self.apiserver_args,
        ]


class _PortTaken(ControlPlaneError):
    pass


def threading_is_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
