"""Credentials and objects for whoever uses a running local cluster: user and service-account
kubeconfigs, serving certificates for webhooks on 127.0.0.1, the CRDs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from . import kubeconfig
from .cluster import LOOPBACK, Cluster, ControlPlaneError


def issue_serving_cert(
    cluster: Cluster, directory: Path, hosts: tuple[str, ...] = (LOOPBACK, "localhost")
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

    Creates the namespace and the ServiceAccount when missing (no service-account
    controller runs in this control plane).
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
