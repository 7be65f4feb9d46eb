"""Kubeconfig files for the local control plane.

Written as JSON (which every YAML loader reads) so that no YAML library is
needed here; credentials are embedded, so a file is usable on its own.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def render(
    server: str,
    ca_pem: bytes,
    user: str,
    *,
    client_cert_pem: bytes | None = None,
    client_key_pem: bytes | None = None,
    token: str | None = None,
    cluster_name: str = "sluice-e2e",
) -> str:
    if token is None and (client_cert_pem is None or client_key_pem is None):
        raise ValueError("a kubeconfig needs either a token or a client certificate and key")
    credentials: dict[str, str] = {}
    if token is not None:
        credentials["token"] = token
    if client_cert_pem is not None and client_key_pem is not None:
        credentials["client-certificate-data"] = _b64(client_cert_pem)
        credentials["client-key-data"] = _b64(client_key_pem)
    context = f"{user}@{cluster_name}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster_name,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": context, "context": {"cluster": cluster_name, "user": user}}],
        "current-context": context,
        "preferences": {},
    }
    return json.dumps(config, indent=2) + "\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.write_text(text)
    return path
