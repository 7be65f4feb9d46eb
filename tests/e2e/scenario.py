"""Building blocks for operator scenarios: an isolated resource per test, nodes, jobs."""

from __future__ import annotations

from typing import Any

from .helpers import Kubectl, unique_name, wait_for


class Scenario:
    """Everything a test creates uses its own extended resource, so the tests share one cluster
    (and one operator) without ever competing for capacity."""

    def __init__(self, kubectl: Kubectl, namespace: str) -> None:
        self.kubectl = kubectl
        self.namespace = namespace
        self.resource = f"e2e.sluice.dev/{unique_name('r')}"
        self.prefix = unique_name("s")

    def name(self, short: str) -> str:
        return f"{self.prefix}-{short}"

    def node(self, amount: int) -> str:
        name = self.name(f"node-{unique_name('n')[-4:]}")
        self.kubectl.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
        status = {
            "status": {
                "allocatable": {self.resource: str(amount)},
                "capacity": {self.resource: str(amount)},
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "e2e",
                        "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            }
        }
        import json

        self.kubectl.run(
            "patch", "node", name, "--subresource=status", "--type=merge", "-p", json.dumps(status)
        )
        return name

    def queue(self, short: str, parent: str | None = None, **spec: Any) -> str:
        name = self.name(short)
        body: dict[str, Any] = {"parent": self.name(parent) if parent else "root", **spec}
        self.kubectl.create(
            {
                "apiVersion": "scheduling.sluice.dev/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": body,
            }
        )
        return name

    def job(self, short: str, queue: str, amount: int, priority_class: str | None = None) -> str:
        pod: dict[str, Any] = {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {
                        "requests": {self.resource: str(amount)},
                        "limits": {self.resource: str(amount)},
                    },
                }
            ],
        }
        if priority_class:
            pod["priorityClassName"] = priority_class
        self.kubectl.create(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": short,
                    "namespace": self.namespace,
                    "labels": {"sluice.dev/queue-name": self.name(queue)},
                },
                "spec": {"suspend": True, "template": {"spec": pod}},
            }
        )
        return short

    def get_job(self, name: str) -> dict[str, Any]:
        return self.kubectl.get("job", name, self.namespace)

    def admitted(self, name: str) -> bool:
        return self.get_job(name)["spec"].get("suspend") is False

    def wait_admitted(self, *names: str, timeout: float = 20) -> None:
        wait_for(
            lambda: all(self.admitted(n) for n in names),
            timeout=timeout,
            what=f"jobs {names} admitted",
        )

    def wait_suspended(self, *names: str, timeout: float = 20) -> None:
        wait_for(
            lambda: all(not self.admitted(n) for n in names),
            timeout=timeout,
            what=f"jobs {names} suspended",
        )

    def annotation(self, job: str, key: str) -> str | None:
        return (self.get_job(job)["metadata"].get("annotations") or {}).get(f"sluice.dev/{key}")

    def queue_status(self, short: str) -> dict[str, Any]:
        return self.kubectl.get("queue", self.name(short)).get("status") or {}

    def complete(self, job: str) -> None:
        """Mark a job finished through the status subresource (no Job controller runs here)."""
        import json

        now = "2026-01-01T00:00:00Z"
        status = {
            "status": {
                "startTime": now,
                "completionTime": now,
                "succeeded": 1,
                "conditions": [
                    {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now},
                    {"type": "Complete", "status": "True", "lastTransitionTime": now},
                ],
            }
        }
        self.kubectl.run(
            "patch",
            "job",
            job,
            "-n",
            self.namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(status),
        )
