"""Tenants as real users (client certificates and a service account, never system:masters)
against the webhooks and the operator on the living cluster: queue access, no growth past
admission, protection as a privilege, and their own view of the line."""

from __future__ import annotations

import json
from collections.abc import Callable

import devenv
import pytest

from .helpers import Kubectl, KubectlError, unique_name, wait_for
from .scenario import Scenario, kwok
from .tenants import PROTECTORS, Tenant, alice, namespace_role, system

__all__ = ["alice", "system"]  # fixtures


@pytest.fixture
def s(alice: Tenant, kubectl: Kubectl, namespace: str) -> Scenario:
    """The admin sets up queues and nodes; the tenant's own Scenario submits the jobs."""
    return Scenario(kubectl, namespace)


def as_tenant(s: Scenario, tenant: Tenant) -> Scenario:
    mine = Scenario(tenant.kubectl, s.namespace)
    mine.resource, mine.prefix = s.resource, s.prefix
    return mine


def test_a_queue_takes_jobs_only_from_the_namespaces_it_selects(
    s: Scenario, alice: Tenant, kubectl: Kubectl
) -> None:
    s.node(4)
    team = s.queue(
        "team-a",
        capability={s.resource: "1"},
        namespaceSelector={"matchLabels": {"team": s.prefix}},
    )
    mine = as_tenant(s, alice)
    with pytest.raises(KubectlError) as refused:
        mine.job("early", "team-a", 1)
    assert (
        f"job {s.namespace}/early: queue {team} takes jobs only from namespaces matching"
        f" team={s.prefix} (spec.namespaceSelector); namespace {s.namespace} does not match"
    ) in str(refused.value)
    kubectl.run("label", "namespace", s.namespace, f"team={s.prefix}")
    wait_for(lambda: _created(mine, "late", "team-a"), timeout=40, what="the label seen")
    s.wait_admitted("late")
    mine.job("next", "team-a", 1)
    wait_for(lambda: "capability 1" in (s.annotation("next", "pending-reason") or ""), what="next")
    # Narrowed after the fact: what runs keeps running, what waits waits with the reason.
    kubectl.run(
        "patch", "queue", team, "--type=merge",
        "-p", json.dumps({"spec": {"namespaceSelector": {"matchLabels": {"team": "other"}}}}),
    )  # fmt: skip
    reason = wait_for(
        lambda: "team=other" in (r := s.annotation("next", "pending-reason") or "") and r,
        what="next's new reason",
    )
    assert reason == (
        f"position 1 in {team}; queue {team} takes jobs only from namespaces matching"
        f" team=other (spec.namespaceSelector); namespace {s.namespace} does not match"
    )
    s.wait_pods_running("late")
    assert s.admitted("late")


def _created(s: Scenario, name: str, queue: str) -> bool:
    try:
        s.job(name, queue, 1)
    except KubectlError:
        return False
    return True


def test_an_admitted_job_cannot_grow_and_the_queue_never_runs_over(
    s: Scenario, alice: Tenant
) -> None:
    s.node(8, allocatable={"cpu": "8"})
    team = s.queue("team", capability={s.resource: "2"})
    manifest = kwok.job(
        "grow",
        kwok.pod_template({s.resource: 1, "cpu": "100m"}),
        namespace=s.namespace,
        queue=team,
        pods=1,
    )
    manifest["spec"]["completions"] = 10  # room for more pods if parallelism were raised
    alice.kubectl.create(manifest)
    s.wait_admitted("grow")
    (pod,) = s.wait_pods_running("grow")
    patch = json.dumps({"spec": {"parallelism": 5}})
    message = alice.refused("patch", "job", "grow", "-n", s.namespace, "--type=merge", "-p", patch)
    assert (
        f"job {s.namespace}/grow: an admitted job cannot grow past what it was admitted with:"
        " cpu 100m -> 500m (parallelism 1 -> 5)"
    ) in message
    resize = json.dumps(
        {"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "2"}}}]}}
    )
    name = pod["metadata"]["name"]
    message = alice.refused(
        "patch", "pod", name, "-n", s.namespace, "--subresource=resize", "-p", resize
    )
    assert "its request cannot grow past what the job was admitted with: cpu 100m -> 2" in message
    message = alice.refused(
        "label",
        "pod",
        name,
        "-n",
        s.namespace,
        "--overwrite",
        "batch.kubernetes.io/controller-uid=x",
    )
    assert "its label batch.kubernetes.io/controller-uid cannot change" in message
    message = alice.refused("delete", "job", "grow", "-n", s.namespace, "--cascade=orphan")
    assert "would leave its pods running outside the queue's quota" in message
    # Lowering is fine; suspending and growing requeues it at the new size, within quota.
    alice.kubectl.run(
        "patch", "job", "grow", "-n", s.namespace, "--type=merge",
        "-p", json.dumps({"spec": {"suspend": True, "parallelism": 3}}),
    )  # fmt: skip
    s.wait_no_pods("grow")
    reason = wait_for(lambda: s.annotation("grow", "pending-reason"), what="a reason")
    assert f"{team} would use {s.resource} 3 > capability 2" in reason
    assert s.queue_status("team").get("allocated", {}).get(s.resource, "0") == "0"


def test_tenants_cannot_protect_jobs_nor_write_the_operators_annotations(
    s: Scenario,
    alice: Tenant,
    kubectl: Kubectl,
    as_user: Callable[..., Kubectl],
    as_service_account: Callable[[str, str], Kubectl],
) -> None:
    s.queue("team")
    mine = as_tenant(s, alice)
    mine.job("j", "team", 1)
    message = alice.refused(
        "annotate", "job", "j", "-n", s.namespace, "sluice.dev/preemptable=false"
    )
    assert (
        f"job {s.namespace}/j: annotation sluice.dev/preemptable can be set or changed only by"
        " the sluice operator and the users and groups in webhooks.protectedJobUsers"
        f" ({', '.join(devenv.PROTECTED_JOB_USERS)})"
    ) in message
    # A service account of the namespace is a tenant like any other.
    robot = unique_name("ci")
    kubectl.run("create", "serviceaccount", robot, "-n", s.namespace)
    namespace_role(kubectl, s.namespace, [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": alice_name(alice)},
        {"kind": "ServiceAccount", "name": robot, "namespace": s.namespace},
    ])  # fmt: skip
    bot = Tenant(as_service_account(s.namespace, robot), s.namespace)
    wait_for(lambda: bot.kubectl.can_i("patch", "jobs", s.namespace), what="the robot's role")
    for key in ("admitted-at", "reclaimed-by", "pending-reason"):
        message = bot.refused(
            "annotate", "job", "j", "-n", s.namespace, "--overwrite", f"sluice.dev/{key}=x"
        )
        assert f"annotation sluice.dev/{key} is written by the sluice operator only" in message
    # An admin in webhooks.protectedJobUsers (by group) may, with only namespace rights.
    admin_name = unique_name("platform")
    namespace_role(kubectl, s.namespace, [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": admin_name},
    ])  # fmt: skip
    admin = as_user(admin_name, groups=[PROTECTORS])
    wait_for(lambda: admin.can_i("patch", "jobs", s.namespace), what="the admin's role")
    admin.run("annotate", "job", "j", "-n", s.namespace, "sluice.dev/preemptable=false")
    assert s.annotation("j", "preemptable") == "false"


def alice_name(alice: Tenant) -> str:
    return str(alice.kubectl.run("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"))


def test_a_tenant_sees_queues_and_their_own_line_with_namespace_rights_only(
    s: Scenario, alice: Tenant
) -> None:
    s.node(4)
    small = s.queue("small", capability={s.resource: "1"})
    mine = as_tenant(s, alice)
    for name in ("first", "second", "third"):
        mine.job(name, "small", 1)
    s.wait_admitted("first")
    wait_for(lambda: s.annotation("third", "pending-reason"), what="third's reason")
    assert not alice.kubectl.can_i("list", "jobs", "kube-system")
    assert not alice.kubectl.can_i("list", "nodes")
    assert small in alice.kubectl.run("get", "sq", "-o", "name")
    listing = alice.sluice("job", "list", "-n", s.namespace).stdout.splitlines()
    rows = [line.split()[:4] for line in listing[1:]]
    assert listing[0].split() == [
        "NAME",
        "QUEUE",
        "STATE",
        "POSITION",
        "REASON",
        "ADMITTED-AT",
        "ADMITTED",
        "FLAVOR",
    ]
    assert rows[0][:3] == ["first", small, "running"] or rows[0][:3] == ["first", small, "inqueue"]
    assert [r[0] for r in rows[1:]] == ["second", "third"]
    assert [r[3] for r in rows[1:]] == ["1", "2"]
    why = alice.sluice("job", "why", f"{s.namespace}/third").stdout
    assert f"job {s.namespace}/third is pending, position 2 in queue {small}" in why
    assert f"reason: {small} would use {s.resource} 2 > capability 1" in why
    assert "Warning  Pending:" in why
    other = alice.sluice("job", "list", "-n", "kube-system", ok=False)
    assert other.returncode == 1 and "not allowed to list jobs in namespace kube-system" in (
        other.stderr
    )
