"""Random sequences of tenant writes to admitted and pending Jobs, against the real API
server with the webhooks and the operator running. After every write: no queue's admitted
jobs add up to more than its capability, and no write the API server accepted broke a rule
(a tenant's job never grew while admitted, never changed a sluice.dev/ annotation, never
unsuspended itself, never left or changed its queue while admitted, never orphaned its pods).
At the end of each sequence the running pods fit in the capabilities too.

The seeds are fixed, so a failure replays; the summary line says how many ran.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sluice.api.views import job_finished
from sluice.kube import api_client
from sluice.queues.jobs import job_admitted, job_queue, workload_request

from .helpers import SUMMARY, Kubectl, wait_for
from .scenario import Scenario, kwok
from .tenants import Tenant, alice, system

__all__ = ["alice", "system"]  # fixtures

SEQUENCES = 6
STEPS = 15
CAPABILITY = {"a": 3, "b": 2}


@dataclass
class Tally:
    sequences: int = 0
    writes: int = 0
    accepted: int = 0
    conflicts: int = 0
    refused: dict[str, int] = field(default_factory=dict)


def _sluice_annotations(job: dict[str, Any]) -> dict[str, str]:
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    return {k: v for k, v in annotations.items() if k.startswith("sluice.dev/")}


def broken_rule(before: dict[str, Any], after: dict[str, Any] | None, deleted_with: str) -> str:
    """The rule an accepted tenant write broke, or "" (after is None for a deletion)."""
    admitted = job_admitted(before)
    if after is None:
        orphaned = deleted_with == "Orphan"
        return "an admitted job deleted with its pods orphaned" if admitted and orphaned else ""
    if before["spec"].get("suspend") and not after["spec"].get("suspend"):
        return "a tenant unsuspended a job"
    if _sluice_annotations(before) != _sluice_annotations(after):
        return "a tenant changed a sluice.dev/ annotation"
    if admitted and job_queue(before) != job_queue(after):
        return "an admitted job changed its queue"
    if not job_finished(before) and job_queue(after) is None:
        return "an unfinished job left its queue"
    if admitted and not after["spec"].get("suspend"):
        grown = workload_request(after).exceeding(
            workload_request(before), absent_is_unlimited=False
        )
        if grown:
            return f"an admitted job grew: {grown}"
    if admitted and "orphan" in (after["metadata"].get("finalizers") or []):
        return "an admitted job got the orphan finalizer"
    return ""


class Fuzzer:
    def __init__(self, s: Scenario, tenant: Tenant, queues: dict[str, str], tally: Tally):
        self.s = s
        self.queues = queues
        self.tally = tally
        self.tenant = client.BatchV1Api(api_client(str(tenant.kubectl.kubeconfig)))
        self.admin = client.BatchV1Api(api_client(str(s.kubectl.kubeconfig)))
        self.serial = 0

    def new_job(self, rng: random.Random) -> None:
        self.serial += 1
        short = rng.choice(sorted(self.queues))
        manifest = kwok.job(
            f"f{self.serial}",
            kwok.pod_template({self.s.resource: 1, "cpu": "100m"}),
            namespace=self.s.namespace,
            queue=self.queues[short],
            pods=1,
        )
        manifest["spec"]["completions"] = 20
        self.tenant.create_namespaced_job(self.s.namespace, manifest)

    def jobs(self) -> list[dict[str, Any]]:
        listing = self.admin.list_namespaced_job(self.s.namespace)
        return [self.admin.api_client.sanitize_for_serialization(j) for j in listing.items]

    def writes(self) -> list[tuple[str, Callable[[dict[str, Any], random.Random], Any]]]:
        annotate = self._annotate
        return [
            ("parallelism up", lambda j, r: {"spec": {"parallelism": r.randint(2, 6)}}),
            ("parallelism down", lambda j, r: {"spec": {"parallelism": 1}}),
            ("suspend", lambda j, r: {"spec": {"suspend": True}}),
            ("unsuspend", lambda j, r: {"spec": {"suspend": False}}),
            ("suspend and grow", lambda j, r: {"spec": {"suspend": True, "parallelism": 2}}),
            ("protect", annotate("sluice.dev/preemptable", "false")),
            ("fake admission", annotate("sluice.dev/admitted-at", "2030-01-01T00:00:00Z")),
            ("clear reason", annotate("sluice.dev/pending-reason", None)),
            ("invent annotation", annotate("sluice.dev/priority-boost", "9")),
            ("own annotation", annotate("team.example/owner", "alice")),
            ("own label", lambda j, r: {"metadata": {"labels": {"team.example/x": "1"}}}),
            ("move queue", self._move),
            ("leave queue", lambda j, r: {"metadata": {"labels": {"sluice.dev/queue-name": None}}}),
            ("orphan finalizer", lambda j, r: {"metadata": {"finalizers": ["orphan"]}}),
            ("bigger pods", self._bigger_pods),
            ("delete orphaning", self._delete("Orphan")),
            ("delete", self._delete("Background")),
        ]

    @staticmethod
    def _annotate(key: str, value: str | None) -> Callable[[dict[str, Any], random.Random], Any]:
        return lambda j, r: {"metadata": {"annotations": {key: value}}}

    def _move(self, job: dict[str, Any], rng: random.Random) -> Any:
        return {
            "metadata": {
                "labels": {"sluice.dev/queue-name": rng.choice(list(self.queues.values()))}
            }
        }

    def _bigger_pods(self, job: dict[str, Any], rng: random.Random) -> Any:
        container = {"name": "main", "resources": {"requests": {"cpu": "2"}}}
        return {"spec": {"template": {"spec": {"containers": [container]}}}}

    def _delete(self, policy: str) -> Callable[[dict[str, Any], random.Random], Any]:
        return lambda j, r: client.V1DeleteOptions(propagation_policy=policy)

    def step(self, rng: random.Random) -> None:
        jobs = [j for j in self.jobs() if not j["metadata"].get("deletionTimestamp")]
        while len(jobs) < 3:
            self.new_job(rng)
            jobs = [j for j in self.jobs() if not j["metadata"].get("deletionTimestamp")]
        time.sleep(rng.choice((0.0, 0.1, 0.5)))  # let the operator act between some writes
        before = rng.choice(jobs)
        name = before["metadata"]["name"]
        kind, make = rng.choice(self.writes())
        body = make(before, rng)
        # Every write is conditional on the version read, so `before` is exactly what it
        # changed (the operator writes the same jobs meanwhile); a conflict is tried anew.
        version = before["metadata"]["resourceVersion"]
        self.tally.writes += 1
        try:
            if isinstance(body, client.V1DeleteOptions):
                body.preconditions = client.V1Preconditions(resource_version=version)
                self.tenant.delete_namespaced_job(name, self.s.namespace, body=body)
                after = None
            else:
                body.setdefault("metadata", {})["resourceVersion"] = version
                answer = self.tenant.patch_namespaced_job(name, self.s.namespace, body)
                after = self.tenant.api_client.sanitize_for_serialization(answer)
        except ApiException as err:
            if err.status == 409:
                self.tally.conflicts += 1
                return
            assert err.status in (400, 403, 422), (kind, err.status, err.body)
            self.tally.refused[kind] = self.tally.refused.get(kind, 0) + 1
            return
        self.tally.accepted += 1
        policy = body.propagation_policy if isinstance(body, client.V1DeleteOptions) else ""
        broke = broken_rule(before, after, policy)
        assert not broke, f"{kind} on {name} got past a rule: {broke}"
        self.check_quota()

    def check_quota(self) -> None:
        for short, queue in self.queues.items():
            held = sum(
                workload_request(j).get_amount(self.s.resource)
                for j in self.jobs()
                if job_queue(j) == queue and job_admitted(j)
            )
            assert held <= CAPABILITY[short] * 1000, f"{queue} holds {held / 1000} > capability"

    def check_pods_settled(self, kubectl: Kubectl) -> None:
        """Once the Job controller has caught up, running pods fit in each capability."""

        def settled() -> dict[str, int] | None:
            pods = kubectl.json("get", "pods", "-n", self.s.namespace)["items"]
            if any(p["metadata"].get("deletionTimestamp") for p in pods):
                return None
            # A pending job moved to another queue keeps its pods' old label: go by the Job.
            queue_of = {j["metadata"]["name"]: job_queue(j) or "" for j in self.jobs()}
            used: dict[str, int] = {}
            for pod in pods:
                if pod["status"].get("phase") in ("Running", "Pending"):
                    owner = pod["metadata"]["labels"].get("batch.kubernetes.io/job-name", "")
                    queue = queue_of.get(owner, "")
                    used[queue] = used.get(queue, 0) + 1
            return used or {"": 0}

        used = wait_for(settled, timeout=60, what="pods settled")
        for short, queue in self.queues.items():
            assert used.get(queue, 0) <= CAPABILITY[short], (queue, used)


@pytest.mark.parametrize("seed", range(SEQUENCES))
def test_random_tenant_writes_never_get_around_quota(
    seed: int, alice: Tenant, kubectl: Kubectl, namespace: str, tally: Tally
) -> None:
    s = Scenario(kubectl, namespace)
    s.node(10, allocatable={"cpu": "40"})
    queues = {
        short: s.queue(short, capability={s.resource: str(cap)})
        for short, cap in CAPABILITY.items()
    }
    fuzzer = Fuzzer(s, alice, queues, tally)
    rng = random.Random(seed)
    for _ in range(4):
        fuzzer.new_job(rng)
    wait_for(lambda: any(job_admitted(j) for j in fuzzer.jobs()), what="a job admitted")
    for _ in range(STEPS):
        fuzzer.step(rng)
    fuzzer.check_pods_settled(kubectl)
    tally.sequences += 1


@pytest.fixture(scope="module")
def tally(request: pytest.FixtureRequest) -> Any:
    found = Tally()
    yield found
    refused = ", ".join(f"{k} {v}" for k, v in sorted(found.refused.items()))
    request.config.stash.setdefault(SUMMARY, []).append(
        f"tenant write fuzz: {found.sequences} sequences, {found.writes} writes,"
        f" {found.accepted} accepted, {found.conflicts} lost a race with the operator,"
        f" refused: {refused}"
    )
