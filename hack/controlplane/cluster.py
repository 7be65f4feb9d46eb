"""Start and stop etcd + kube-apiserver on 127.0.0.1.

A cluster lives in a state directory (`<repo>/.cluster` for `make cluster-up`,
a temporary one for the pytest fixture):

    state.json        ports, pids, data dir: what `down` needs to clean up
    kubeconfig        admin (system:masters) credentials
    ca.crt            the cluster CA: put it in a webhook's caBundle
    pki/              CA key, serving certs, service-account keys
    logs/             etcd.log, kube-apiserver.log

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
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import binaries, kubeconfig

START_TIMEOUT = float(os.environ.get("SLUICE_CONTROLPLANE_START_TIMEOUT", "90"))
STOP_TIMEOUT = 15.0
ADMIN_USER = "sluice-admin"
SERVICE_CIDR = "10.0.0.0/24"
_LOOPBACK = "127.0.0.1"


class ControlPlaneError(RuntimeError):
    pass


def _log(message: str) -> None:
    print(f"[controlplane] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((_LOOPBACK, 0))
        return int(s.getsockname()[1])


@dataclass
class State:
    """What is persisted in state.json about a (possibly half-started) cluster."""

    bin_dir: str
    data_dir: str
    etcd_port: int
    etcd_peer_port: int
    api_port: int
    pids: dict[str, int] = field(default_factory=dict)

    @property
    def server(self) -> str:
        return f"https://{_LOOPBACK}:{self.api_port}"


@dataclass(frozen=True)
class Cluster:
    """A running control plane, as tests and scripts see it."""

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

    def env(self) -> dict[str, str]:
        """Environment for a subprocess that should talk to this cluster."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}


# -- processes ------------------------------------------------------------------------------


def _set_parent_death_signal() -> None:
    """In the child: die with the parent (the pytest process), never outlive it."""
    import ctypes

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    # SIGKILL: with etcd gone too, a SIGTERMed kube-apiserver hangs in its shutdown hooks.
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


def _is_ours(pid: int, binary: Path) -> bool:
    """True when pid is alive and runs `binary` (pids are reused after a reboot)."""
    for _ in range(20):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            _reap(pid)
            return False
        if cmdline:
            return cmdline.split(b"\0")[0].decode(errors="replace") == str(binary)
        # Empty while the process is between fork and a finished exec: look again.
        time.sleep(0.05)
    return False


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _stop_process(
    name: str, pid: int, binary: Path, child: subprocess.Popen[bytes] | None = None
) -> None:
    if child is not None and child.poll() is not None:
        return
    if child is None and not _is_ours(pid, binary):
        return
    _log(f"stopping {name} (pid {pid})")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)

    def gone() -> bool:
        if child is not None:
            return child.poll() is not None
        _reap(pid)
        return not _is_ours(pid, binary)

    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline:
        if gone():
            return
        time.sleep(0.1)
    _log(f"{name} (pid {pid}) ignored SIGTERM; killing it")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    for _ in range(50):
        if gone():
            return
        time.sleep(0.1)


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:])
    except OSError:
        return "(no log)\n"


# -- the control plane ----------------------------------------------------------------------


class ControlPlane:
    """etcd + kube-apiserver whose state lives in `state_dir`."""

    def __init__(
        self, state_dir: Path, *, tie_to_parent: bool = False, data_root: Path | None = None
    ) -> None:
        """tie_to_parent: the processes die with this one (for test fixtures).
        data_root: where etcd's temporary data dir goes (default: the system's temp dir).
        """
        self.state_dir = Path(state_dir).resolve()
        self.tie_to_parent = tie_to_parent
        self.data_root = data_root
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
    def _ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.state_dir / "ca.crt"))
        context.load_cert_chain(str(self._pki / "admin.crt"), str(self._pki / "admin.key"))
        return context

    def _readyz(self, state: State, timeout: float = 2.0) -> bool:
        try:
            with urllib.request.urlopen(
                f"{state.server}/readyz", timeout=timeout, context=self._ssl_context()
            ) as response:
                return bool(response.status == 200)
        except (OSError, ssl.SSLError, ValueError):
            return False

    @staticmethod
    def _etcd_healthy(state: State) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://{_LOOPBACK}:{state.etcd_port}/health", timeout=2.0
            ) as response:
                return bool(json.loads(response.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def _running(self, state: State) -> bool:
        bin_dir = Path(state.bin_dir)
        return all(
            name in state.pids and _is_ours(state.pids[name], bin_dir / name)
            for name in ("etcd", "kube-apiserver")
        )

    def status(self) -> Cluster | None:
        """The cluster if it runs and answers /readyz, else None."""
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
                    _log(f"reusing the running control plane at {existing.server}")
                    return self._cluster(existing)
                _log("found a stale or half-started control plane; cleaning it up first")
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
        # The API server first, so it does not log a storm of etcd errors.
        for name in ("kube-apiserver", "etcd"):
            if name in state.pids:
                pid = state.pids[name]
                _stop_process(name, pid, bin_dir / name, self._children.pop(pid, None))
        if state.data_dir and Path(state.data_dir).name.startswith("sluice-etcd-"):
            shutil.rmtree(state.data_dir, ignore_errors=True)
        for path in (self._state_file, self.state_dir / "kubeconfig", self.state_dir / "ca.crt"):
            path.unlink(missing_ok=True)
        shutil.rmtree(self._pki, ignore_errors=True)

    def _spawn(self, name: str, command: list[str], env: dict[str, str]) -> int:
        self._logs.mkdir(parents=True, exist_ok=True)
        with (self._logs / f"{name}.log").open("w") as log:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.state_dir,
                start_new_session=True,  # a Ctrl-C in the shell must not hit them directly
                preexec_fn=_set_parent_death_signal if self.tie_to_parent else None,
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
        )
        self._write_state(state)
        try:
            self._write_pki(state)
            env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
            state.pids["etcd"] = self._spawn("etcd", self._etcd_command(state), env)
            self._write_state(state)
            self._wait("etcd", state, lambda: self._etcd_healthy(state))
            state.pids["kube-apiserver"] = self._spawn(
                "kube-apiserver", self._apiserver_command(state), env
            )
            self._write_state(state)
            self._wait("kube-apiserver", state, lambda: self._readyz(state))
        except BaseException:
            self._teardown(state)
            raise
        cluster = self._cluster(state)
        _log(f"control plane ready at {state.server} in {time.monotonic() - started:.1f}s")
        return cluster

    def _wait(self, name: str, state: State, ready: Callable[[], bool]) -> None:
        binary = Path(state.bin_dir) / name
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if ready():
                return
            child = self._children.get(state.pids[name])
            exited = child.poll() is not None if child else not _is_ours(state.pids[name], binary)
            if exited:
                log = self._logs / f"{name}.log"
                text = _tail(log)
                if "address already in use" in text:
                    raise _PortTaken(f"{name}: address already in use")
                raise ControlPlaneError(f"{name} exited during start; end of {log}:\n{text}")
            time.sleep(0.25)
        log = self._logs / f"{name}.log"
        raise ControlPlaneError(
            f"{name} not ready after {START_TIMEOUT:.0f}s; end of {log}:\n{_tail(log)}"
        )

    def _write_pki(self, state: State) -> None:
        from . import pki

        self._pki.mkdir(parents=True, exist_ok=True)
        ca = pki.CertificateAuthority.create()
        ca.write(self._pki / "ca.crt", self._pki / "ca.key")
        (self.state_dir / "ca.crt").write_bytes(ca.cert_pem)
        serving = ca.issue_serving(
            (
                _LOOPBACK,
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

    def _etcd_command(self, state: State) -> list[str]:
        client = f"http://{_LOOPBACK}:{state.etcd_port}"
        peer = f"http://{_LOOPBACK}:{state.etcd_peer_port}"
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
            "--log-level=warn",
        ]

    def _apiserver_command(self, state: State) -> list[str]:
        p = self._pki
        return [
            str(Path(state.bin_dir) / "kube-apiserver"),
            f"--etcd-servers=http://{_LOOPBACK}:{state.etcd_port}",
            f"--bind-address={_LOOPBACK}",
            f"--advertise-address={_LOOPBACK}",
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
            # No controller-manager creates `default` ServiceAccounts, so Pods would be refused.
            "--disable-admission-plugins=ServiceAccount",
            # Nothing here serves the `kubernetes` Service; do not reconcile its endpoints.
            "--endpoint-reconciler-type=none",
            "--allow-privileged=true",
            "--profiling=false",
        ]


class _PortTaken(ControlPlaneError):
    pass


def threading_is_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def issue_serving_cert(
    cluster: Cluster, directory: Path, hosts: tuple[str, ...] = (_LOOPBACK, "localhost")
) -> tuple[Path, Path]:
    """Write tls.crt/tls.key for a server on `hosts`, signed by the cluster CA.

    Use the cluster's `ca_cert` as the webhook configuration's caBundle.
    """
    from . import pki

    ca = pki.CertificateAuthority.load(cluster.ca_cert, cluster.ca_key)
    pair = ca.issue_serving(hosts)
    cert, key = directory / "tls.crt", directory / "tls.key"
    pair.write(cert, key)
    return cert, key


def user_kubeconfig(
    cluster: Cluster, user: str, groups: tuple[str, ...] | list[str] = (), path: Path | None = None
) -> Path:
    """A kubeconfig authenticating as `user` in `groups` by client certificate.

    The API server adds `system:authenticated`; RBAC decides the rest.
    """
    from . import pki

    ca = pki.CertificateAuthority.load(cluster.ca_cert, cluster.ca_key)
    pair = ca.issue_client(user, list(groups))
    target = path or cluster.state_dir / "users" / f"{_safe(user)}.kubeconfig"
    return kubeconfig.write(
        target,
        kubeconfig.render(
            cluster.server,
            ca.cert_pem,
            user,
            client_cert_pem=pair.cert_pem,
            client_key_pem=pair.key_pem,
        ),
    )


def service_account_kubeconfig(
    cluster: Cluster,
    namespace: str,
    name: str,
    path: Path | None = None,
    duration: str = "2h",
) -> Path:
    """A kubeconfig with a TokenRequest token for ServiceAccount namespace/name.

    Creates the namespace and the ServiceAccount when missing (no controller
    does it in this control plane).
    """
    manifest = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": namespace},
            },
        ],
    }
    kubectl = [str(cluster.kubectl), f"--kubeconfig={cluster.kubeconfig}"]
    subprocess.run(
        [*kubectl, "apply", "-f", "-"],
        input=json.dumps(manifest),
        text=True,
        check=True,
        capture_output=True,
    )
    token = subprocess.run(
        [*kubectl, "create", "token", name, "-n", namespace, f"--duration={duration}"],
        text=True,
        check=True,
        capture_output=True,
    ).stdout.strip()
    user = f"system:serviceaccount:{namespace}:{name}"
    target = path or cluster.state_dir / "users" / f"{_safe(user)}.kubeconfig"
    return kubeconfig.write(
        target, kubeconfig.render(cluster.server, cluster.ca_cert.read_bytes(), user, token=token)
    )


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def install_crds(cluster: Cluster, crd_dir: Path, timeout: str = "60s") -> list[str]:
    """Apply every YAML file in crd_dir and wait until each CRD is Established."""
    files = sorted(p for p in crd_dir.iterdir() if p.suffix in (".yaml", ".yml"))
    if not files:
        return []
    kubectl = [str(cluster.kubectl), f"--kubeconfig={cluster.kubeconfig}"]
    args = [arg for f in files for arg in ("-f", str(f))]
    applied = subprocess.run(
        [*kubectl, "apply", "--server-side", "--force-conflicts", "-o", "name", *args],
        text=True,
        capture_output=True,
    )
    if applied.returncode != 0:
        raise ControlPlaneError(f"installing CRDs from {crd_dir} failed:\n{applied.stderr}")
    crds = [n for n in applied.stdout.split() if n.startswith("customresourcedefinition")]
    if crds:
        waited = subprocess.run(
            [*kubectl, "wait", "--for=condition=Established", f"--timeout={timeout}", *crds],
            text=True,
            capture_output=True,
        )
        if waited.returncode != 0:
            raise ControlPlaneError(f"CRDs not Established:\n{waited.stderr}")
    return crds
