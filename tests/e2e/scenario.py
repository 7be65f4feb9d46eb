"""Building blocks for operator scenarios: an isolated resource per test, fake nodes, jobs, and
what their pods do on the living cluster."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .helpers import Kubectl, controlplane, unique_name, wait_for

kwok = controlplane.kwok


class Scenario:
    """Everything a test creates uses its own extended resource, so the tests share one cluster
    (and one operator) without ever competing for capacity: its jobs' pods fit only on its own
    nodes, which KWOK runs them on."""

    def __init__(self, kubectl: Kubectl, namespace: str) -> None:
        self.kubectl = kubectl
        self.namespace = namespace
        self.resource = f"e2e.sluice.dev/{unique_name('r')}"
        self.prefix = unique_name("s")

    def name(self, short: str) -> str:
        return f"{self.prefix}-{short}"

    def node(
        self,
        amount: int,
        *,
        allocatable: Mapping[str, str | int] | None = None,
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, str]] = (),
        unschedulable: bool = False,
    ) -> str:
        """A fake node holding `amount` of this test's resource (and whatever `allocatable`
        adds, e.g. {"cpu": "8"}); KWOK makes it Ready and runs the pods bound to it."""
        name = self.name(f"node-{unique_name('n')[-4:]}")
        resources: dict[str, str | int] = {self.resource: amount, **(allocatable or {})}
        node = kwok.fake_node(
            name, resources, labels=labels, taints=taints, unschedulable=unschedulable
        )
        self.kubectl.create(node)
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

    def job(
        self,
        short: str,
        queue: str,
        amount: int,
        priority_class: str | None = None,
        *,
        pods: int = 1,
        complete_after: str | None = None,
        **template: Any,
    ) -> str:
        """A suspended Job of `pods` pods, each asking for `amount` of this test's resource.

        complete_after: each pod succeeds that long after it starts running (a Go duration),
        so the real Job controller completes the Job; without it the pods run until deleted.
        `template` goes to kwok.pod_template (node_selector, tolerations, ...).
        """
        pod = kwok.pod_template(
            {self.resource: amount},
            complete_after=complete_after,
            priority_class=priority_class,
            **template,
        )
        manifest = kwok.job(
            short,
            pod,
            namespace=self.namespace,
            queue=self.name(queue),
            pods=pods,
            suspend=True,
        )
        self.kubectl.create(manifest)
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

    def events(self, job: str) -> list[dict[str, Any]]:
        """sluice's Events about the Job (the Job controller reports on it too)."""
        selector = f"involvedObject.name={job},source=sluice-operator"
        found = self.kubectl.json(
            "get", "events", "-n", self.namespace, "--field-selector", selector
        )
        return list(found["items"])

    def queue_status(self, short: str) -> dict[str, Any]:
        return self.kubectl.get("queue", self.name(short)).get("status") or {}

    # -- what the living cluster does with them ---------------------------------------------

    def pods(self, job: str) -> list[dict[str, Any]]:
        """The Job's pods as the Job controller created them (terminating ones included)."""
        found = self.kubectl.json(
            "get", "pods", "-n", self.namespace, "-l", f"batch.kubernetes.io/job-name={job}"
        )
        return list(found["items"])

    def wait_pods_running(
        self, job: str, count: int = 1, timeout: float = 30
    ) -> list[dict[str, Any]]:
        """Wait until `count` pods of the Job run (bound to a node, phase Running, none
        terminating); return them."""

        def running() -> list[dict[str, Any]] | None:
            pods = [p for p in self.pods(job) if not p["metadata"].get("deletionTimestamp")]
            ok = len(pods) == count and all(
                p["status"].get("phase") == "Running" and p["spec"].get("nodeName") for p in pods
            )
            return pods if ok else None

        return wait_for(running, timeout=timeout, what=f"{count} pod(s) of {job} Running")

    def wait_no_pods(self, job: str, timeout: float = 30) -> None:
        wait_for(lambda: not self.pods(job), timeout=timeout, what=f"{job}'s pods gone")

    def finished(self, job: str) -> str | None:
        """The Job controller's verdict, "Complete" or "Failed"; None while it runs."""
        for condition in self.get_job(job).get("status", {}).get("conditions") or []:
            if condition["type"] in ("Complete", "Failed") and condition["status"] == "True":
                return str(condition["type"])
        return None

    def wait_complete(self, job: str, timeout: float = 60) -> None:
        outcome = wait_for(lambda: self.finished(job), timeout=timeout, what=f"{job} finished")
        assert outcome == "Complete", f"{job} {outcome}: {self.get_job(job).get('status')}"
