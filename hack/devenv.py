"""The whole system on the local control plane: sluice's webhooks and operator as local
processes, registered with the API server through webhook configurations on 127.0.0.1.

Shared by `make dev-up` / `make dev-down` and the end-to-end tests, so both run the same
wiring.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

OPERATOR_USER = "system:serviceaccount:sluice-system:sluice-operator"
PROTECTED_JOB_USERS = ("system:masters", "sluice-job-protectors")
"""As the chart's webhooks.protectedJobUsers: cluster admins and one group for the tests."""
CONFIG_NAME = "sluice-local"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def local_chart_values(port: int, ca_bundle: str) -> dict[str, Any]:
    """Chart values for sluice's components run as local processes: the chart installs
    everything else, and its webhook configurations point at https://127.0.0.1:port."""
    return {
        "operator": {"enabled": False},
        "webhooks": {"enabled": False, "url": f"https://127.0.0.1:{port}", "caBundle": ca_bundle},
    }


def webhook_configurations(
    port: int,
    ca_bundle: bytes,
    name: str = CONFIG_NAME,
    workloads: Sequence[tuple[str, str]] = (),
    scaled: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Mutating and validating webhook configurations pointing at https://127.0.0.1:port;
    ``workloads``: (group, plural) of the kinds of workload besides Job to send too, as the
    chart's workloads values do; ``scaled``: the plurals among them whose /scale
    subresource is validated too (a PyTorchJob's Worker replicas)."""
    bundle = base64.b64encode(ca_bundle).decode()
    base = f"https://127.0.0.1:{port}"

    def hook(
        hook_name: str, path: str, resource: str, group: str, ops: list[str], **extra: Any
    ) -> dict[str, Any]:
        namespaces = [*extra.pop("namespace_expressions", [])]
        return {
            "name": hook_name,
            "clientConfig": {"url": base + path, "caBundle": bundle},
            "rules": [
                {
                    "apiGroups": [group],
                    "apiVersions": ["*"],
                    "operations": ops,
                    "resources": [resource, *extra.pop("subresources", [])],
                    "scope": "*",
                }
            ],
            **extra,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": 5,
            "namespaceSelector": {
                "matchExpressions": [
                    {
                        "key": "kubernetes.io/metadata.name",
                        "operator": "NotIn",
                        "values": ["kube-system", "sluice-system"],
                    },
                    *namespaces,
                ]
            },
        }

    queues, jobs = "scheduling.sluice.dev", "batch"
    queue_label, default_label = "sluice.dev/queue-name", "sluice.dev/default-queue"
    configs = [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [
                hook(
                    "mutate-queues.sluice.dev",
                    "/mutate/queues",
                    "queues",
                    queues,
                    ["CREATE", "UPDATE"],
                ),
                hook("mutate-jobs.sluice.dev", "/mutate/jobs", "jobs", jobs, ["CREATE"]),
                # Plain pods: those labelled with a queue, and those of a namespace with a
                # default queue (each pod reaches the webhook once).
                hook(
                    "mutate-pods.sluice.dev",
                    "/mutate/pods",
                    "pods",
                    "",
                    ["CREATE"],
                    objectSelector={
                        "matchExpressions": [{"key": queue_label, "operator": "Exists"}]
                    },
                ),
                hook(
                    "mutate-namespace-pods.sluice.dev",
                    "/mutate/pods",
                    "pods",
                    "",
                    ["CREATE"],
                    objectSelector={
                        "matchExpressions": [{"key": queue_label, "operator": "DoesNotExist"}]
                    },
                    namespace_expressions=[{"key": default_label, "operator": "Exists"}],
                ),
            ],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [
                hook(
                    "validate-queues.sluice.dev",
                    "/validate/queues",
                    "queues",
                    queues,
                    ["CREATE", "UPDATE", "DELETE"],
                ),
                hook(
                    "validate-jobs.sluice.dev",
                    "/validate/jobs",
                    "jobs",
                    jobs,
                    ["CREATE", "UPDATE", "DELETE"],
                ),
                hook(
                    "validate-pods.sluice.dev",
                    "/validate/pods",
                    "pods",
                    "",
                    ["CREATE", "UPDATE"],
                    subresources=["pods/resize"],
                    objectSelector={
                        "matchExpressions": [{"key": queue_label, "operator": "Exists"}]
                    },
                ),
            ],
        },
    ]
    for config, path, ops in (
        (configs[0], "/mutate/workloads", ["CREATE"]),
        (configs[1], "/validate/workloads", ["CREATE", "UPDATE", "DELETE"]),
    ):
        for group, plural in workloads:
            more = [f"{plural}/scale"] if plural in scaled and "UPDATE" in ops else []
            config["webhooks"].append(
                hook(
                    f"{path[1:].replace('/', '-')}-{plural}.sluice.dev",
                    path,
                    plural,
                    group,
                    ops,
                    subresources=more,
                )
            )
    if ("ray.io", "rayjobs") in workloads:
        # The RayClusters of managed RayJobs (KubeRay copies the queue label onto them).
        configs[1]["webhooks"].append(
            hook(
                "validate-rayclusters.sluice.dev",
                "/validate/rayclusters",
                "rayclusters",
                "ray.io",
                ["UPDATE"],
                objectSelector={"matchExpressions": [{"key": queue_label, "operator": "Exists"}]},
            )
        )
    return configs


def start_webhooks(
    kubeconfig: Path, cert: Path, key: Path, port: int, log: Path, *extra: str
) -> subprocess.Popen[bytes]:
    return _start(
        [
            "webhooks",
            "serve",
            "--host=127.0.0.1",
            f"--port={port}",
            f"--tls-cert-file={cert}",
            f"--tls-key-file={key}",
            f"--kubeconfig={kubeconfig}",
            f"--operator-user={OPERATOR_USER}",
            *(f"--protected-job-user={user}" for user in PROTECTED_JOB_USERS),
            # Nothing routes through a Service here, so there is no endpoint removal to wait
            # for before draining: stop at once.
            "--shutdown-delay=0",
            *extra,
        ],
        log,
    )


def start_operator(kubeconfig: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    return _start(
        ["operator", "run", f"--kubeconfig={kubeconfig}", "--namespace=sluice-system", *extra], log
    )


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("a") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "sluice.cli.main", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )


def wait_ready(port: int, ca_file: Path, process: subprocess.Popen[bytes], log: Path) -> None:
    context = ssl.create_default_context(cafile=str(ca_file))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"webhook server exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(
                f"https://127.0.0.1:{port}/readyz", context=context, timeout=2
            ) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("webhook server not ready within 30s")


def stop(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def save_pids(path: Path, pids: dict[str, int]) -> None:
    path.write_text(json.dumps(pids))


def load_pids(path: Path) -> dict[str, int]:
    try:
        return {k: int(v) for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError):
        return {}
