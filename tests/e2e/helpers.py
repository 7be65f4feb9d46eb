"""Helpers for end-to-end tests: a thin kubectl wrapper and polling.

Tests drive the cluster through kubectl, as a user would, so that what they
prove (schema defaults, validation messages, RBAC refusals) is what a person
running kubectl sees.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack"))

import controlplane  # noqa: E402  (hack/controlplane: the same code as `make cluster-up`)

# The single source of the schema, installed by the fixture and rendered by the chart.
CRD_DIR = REPO / "crds"

__all__ = [
    "CRD_DIR",
    "REPO",
    "Kubectl",
    "KubectlError",
    "controlplane",
    "queue",
    "unique_name",
    "wait_for",
]

T = TypeVar("T")

Manifest = str | dict[str, Any] | list[dict[str, Any]]


class KubectlError(RuntimeError):
    """kubectl exited non-zero; str() holds its stderr, for `pytest.raises(match=...)`."""

    def __init__(self, args: list[str], returncode: int, stderr: str) -> None:
        super().__init__(stderr.strip())
        self.args_ = args
        self.returncode = returncode
        self.stderr = stderr


def _to_text(manifest: Manifest) -> str:
    if isinstance(manifest, str):
        return manifest
    documents = manifest if isinstance(manifest, list) else [manifest]
    return yaml.safe_dump_all(documents, sort_keys=False)


class Kubectl:
    """kubectl bound to one kubeconfig (one identity)."""

    def __init__(self, binary: Path, kubeconfig: Path, timeout: float = 60.0) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig
        self.timeout = timeout

    def run(self, *args: str, input: str | None = None, check: bool = True) -> str:
        """Run kubectl; return stdout, raise KubectlError on failure when check."""
        command = [str(self.binary), f"--kubeconfig={self.kubeconfig}", *args]
        result = subprocess.run(
            command, input=input, text=True, capture_output=True, timeout=self.timeout
        )
        if check and result.returncode != 0:
            raise KubectlError(command, result.returncode, result.stderr)
        return result.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json"))

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        scope = ["-n", namespace] if namespace else []
        result: dict[str, Any] = self.json("get", kind, name, *scope)
        return result

    def apply(self, manifest: Manifest, *args: str) -> str:
        return self.run("apply", "-f", "-", *args, input=_to_text(manifest))

    def create(self, manifest: Manifest, *args: str) -> str:
        return self.run("create", "-f", "-", *args, input=_to_text(manifest))

    def delete(self, kind: str, name: str, namespace: str | None = None) -> str:
        scope = ["-n", namespace] if namespace else []
        return self.run("delete", kind, name, *scope, "--ignore-not-found", "--wait=false")

    def can_i(self, verb: str, resource: str, namespace: str | None = None) -> bool:
        scope = ["-n", namespace] if namespace else []
        out = self.run("auth", "can-i", verb, resource, *scope, check=False)
        return out.strip() == "yes"


SUMMARY = pytest.StashKey[list[str]]()
"""Lines the e2e suite prints at its end (what a fuzz test ran, say)."""


def unique_name(prefix: str) -> str:
    """A DNS-1123 name unique to this run: tests share one cluster per session."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_for(
    probe: Callable[[], T | None],
    *,
    timeout: float = 30.0,
    interval: float = 0.2,
    what: str = "condition",
) -> T:
    """Poll until probe() returns something truthy; return it, or fail with `what`."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


def wait_for_reserved_queues(kubectl: Kubectl) -> None:
    """Until the operator has created root and default (or found them)."""
    wait_for(
        lambda: kubectl.run("get", "queue", "default", "--ignore-not-found", "-o", "name"),
        timeout=30,
        what="the operator to create root and default",
    )


def queue(name: str, **spec: Any) -> dict[str, Any]:
    """A Queue manifest."""
    return {
        "apiVersion": "scheduling.sluice.dev/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


def set_scheduler_config(kubectl: Kubectl, text: str) -> str:
    """Write the sluice-scheduler ConfigMap; its uid tells its Events from an earlier run's."""
    kubectl.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "sluice-scheduler", "namespace": "sluice-system"},
            "data": {"scheduler.yaml": text},
        }
    )
    config_map = kubectl.get("configmap", "sluice-scheduler", "sluice-system")
    return str(config_map["metadata"]["uid"])


@contextmanager
def review_server(
    cluster: controlplane.Cluster,
    directory: Path,
    respond: Callable[[dict[str, Any]], dict[str, Any]],
) -> Iterator[int]:
    """An HTTPS admission webhook of a test's own on 127.0.0.1 (its certificate from the
    cluster CA, the caBundle to register it with): ``respond`` turns each review's request
    into its response (the uid is added). Yields its port."""
    cert, key = controlplane.issue_serving_cert(cluster, directory)

    class Reviews(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            request = review["request"]
            answer = {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": request["uid"], **respond(request)},
            }
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Reviews)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
