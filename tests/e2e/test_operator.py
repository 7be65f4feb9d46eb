"""The operator on a real API server: admission, reasons, reclaim, priority, lifecycle."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .components import Operator
from .helpers import (
    Kubectl,
    KubectlError,
    controlplane,
    set_scheduler_config,
    wait_for,
    wait_for_reserved_queues,
)
from .scenario import Scenario


@pytest.fixture(scope="module")
def operator(
    control_plane: controlplane.Cluster, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    kubectl.run("create", "namespace", "sluice-system", check=False)
    op = Operator(control_plane, tmp_path_factory.mktemp("operator"), "e2e-main")
    try:
        wait_for_reserved_queues(kubectl)
        yield op
    finally:
        op.stop()


@pytest.fixture
def s(operator: Operator, kubectl: Kubectl, namespace: str) -> Scenario:
    return Scenario(kubectl, namespace)


def test_root_and_default_exist_and_report_their_state(s: Scenario, kubectl: Kubectl) -> None:
    wait_for(
        lambda: (kubectl.get("queue", "default").get("status") or {}).get("state") == "Open",
        what="default's status",
    )
    assert kubectl.get("queue", "root")["status"]["state"] == "Open"


def test_admission_within_quota_and_a_reason_beyond_it(s: Scenario, kubectl: Kubectl) -> None:
    s.node(10)
    s.queue("team", capability={s.resource: "4"})
    for name in ("j1", "j2", "j3"):
        s.job(name, "team", 2)
    s.wait_admitted("j1", "j2")
    reason = wait_for(lambda: s.annotation("j3", "pending-reason"), what="j3's pending reason")
    assert not s.admitted("j3")
    assert reason == (
        f"position 1 in {s.name('team')}; {s.name('team')} would use {s.resource} 6 > capability 4"
    )
    assert s.annotation("j1", "admitted-at")
    assert [e["reason"] for e in s.events("j1")] == ["Admitted"]
    refused = wait_for(lambda: s.events("j3"), what="j3's Pending event")
    assert {e["reason"] for e in refused} == {"Pending"}
    assert reason in [e["message"] for e in refused]
    for name in ("j1", "j3"):  # sluice's own annotations only: nothing of Kopf's, no finalizer
        meta = s.get_job(name)["metadata"]
        assert not meta.get("finalizers")
        assert all(key.startswith("sluice.dev/") for key in meta.get("annotations") or {})
        assert not any("kopf" in key or "last-handled" in key for key in meta.get("annotations"))
    # Admitted jobs count as inqueue until their pods are active, then as running.
    status = wait_for(
        lambda: (
            (st := s.queue_status("team")).get("pending") == 1 and st.get("running") == 2 and st
        ),
        what="team's status counts",
    )
    assert status["inqueue"] == 0 and status["allocated"] == {s.resource: "4"}


def test_a_starving_team_reclaims_from_its_sibling_before_its_cousin(s: Scenario) -> None:
    s.node(12)
    s.queue("d1")
    s.queue("d2")
    s.queue("a", "d1")
    s.queue("b", "d1")
    s.queue("c", "d2")
    for name in ("b1", "b2"):
        s.job(name, "b", 3)
    s.wait_admitted("b1", "b2")
    for name in ("c1", "c2"):
        s.job(name, "c", 3)
    s.wait_admitted("c1", "c2")
    s.job("a1", "a", 3)
    s.wait_admitted("a1")
    suspended = [j for j in ("b1", "b2", "c1", "c2") if not s.admitted(j)]
    assert len(suspended) == 1 and suspended[0].startswith("b")  # the sibling, not the cousin
    assert s.annotation(suspended[0], "reclaimed-by") == f"{s.namespace}/a1"


def test_queue_priority_decides_who_is_served_and_who_gives_back(s: Scenario) -> None:
    s.node(8)
    s.queue("low", priority=1)
    s.queue("mid", priority=5)
    s.queue("high", priority=10)
    s.job("l1", "low", 4)
    s.job("m1", "mid", 4)
    s.wait_admitted("l1", "m1")
    # high is owed a third of the cluster; of the two queues above their share, the
    # lower-priority one gives back.
    s.job("h1", "high", 2)
    s.wait_admitted("h1")
    s.wait_suspended("l1")
    assert s.admitted("m1")
    assert s.annotation("l1", "reclaimed-by") == f"{s.namespace}/h1"


def test_admitted_pods_run_and_the_queue_moves_on_when_the_job_controller_completes_it(
    s: Scenario,
) -> None:
    node = s.node(8)
    s.queue("moves", capability={s.resource: "4"})
    # first runs longer than the full pass's period (5 s), so that second's reason, which
    # the full pass writes, is there to read before first completes and second goes in.
    s.job("first", "moves", 2, pods=2, complete_after="10s")
    s.job("second", "moves", 2, pods=2)
    s.wait_admitted("first")
    pods = s.wait_pods_running("first", 2)
    assert {p["spec"]["nodeName"] for p in pods} == {node}
    assert all(p["status"].get("podIP") for p in pods)
    # Quota full: second waits, with nothing of it on the node.
    reason = wait_for(lambda: s.annotation("second", "pending-reason"), what="second's reason")
    assert "capability 4" in reason
    assert not s.admitted("second") and not s.pods("second")
    # KWOK ends first's pods 10 s after they started; the Job controller, not the test, marks
    # the Job Complete, and sluice admits the next job on its own.
    s.wait_complete("first", timeout=30)
    assert s.get_job("first")["status"]["succeeded"] == 2
    assert {p["status"]["phase"] for p in s.pods("first")} == {"Succeeded"}
    s.wait_admitted("second", timeout=30)
    assert {p["spec"]["nodeName"] for p in s.wait_pods_running("second", 2)} == {node}


def test_closing_until_the_job_controller_finishes_the_last_job_then_closed(
    s: Scenario, kubectl: Kubectl
) -> None:
    s.node(4)
    q = s.queue("closing")
    s.job("last", "closing", 1, complete_after="8s")
    s.wait_admitted("last")
    kubectl.run("patch", "queue", q, "--type=merge", "-p", '{"spec":{"state":"Closed"}}')
    wait_for(lambda: s.queue_status("closing").get("state") == "Closing", what="Closing")
    s.wait_pods_running("last")  # still running: Closing waits for it
    s.wait_complete("last", timeout=30)
    wait_for(lambda: s.queue_status("closing").get("state") == "Closed", what="Closed")


def test_cascade_close_then_cascade_delete(s: Scenario, kubectl: Kubectl) -> None:
    dept = s.queue("dept")
    team = s.queue("team", "dept")
    kubectl.run("patch", "queue", dept, "--type=merge", "-p", '{"spec":{"state":"Closed"}}')
    wait_for(lambda: s.queue_status("dept").get("state") == "Closed", what="dept Closed")
    child = kubectl.get("queue", team)
    assert child["spec"]["state"] == "Closed"
    assert child["metadata"]["annotations"]["sluice.dev/closed-by-parent"] == dept
    kubectl.delete("queue", dept)

    def gone() -> bool:
        names = kubectl.run("get", "queues", "-o", "name")
        return dept not in names and team not in names

    try:
        wait_for(gone, what="the subtree deleted")
    except AssertionError:
        print(kubectl.run("get", "queues", "-o", "yaml"))
        raise


def test_reopening_the_parent_reopens_exactly_what_it_closed(s: Scenario, kubectl: Kubectl) -> None:
    dept = s.queue("dept2")
    s.queue("kid", "dept2")
    kubectl.run("patch", "queue", dept, "--type=merge", "-p", '{"spec":{"state":"Closed"}}')
    wait_for(lambda: s.queue_status("kid").get("state") == "Closed", what="kid Closed")
    kubectl.run("patch", "queue", dept, "--type=merge", "-p", '{"spec":{"state":"Open"}}')
    wait_for(
        lambda: kubectl.get("queue", s.name("kid"))["spec"]["state"] == "Open", what="kid reopened"
    )


def _config_events(kubectl: Kubectl, uid: str, reason: str) -> list[str]:
    selector = f"involvedObject.uid={uid},reason={reason}"
    events = kubectl.json("get", "events", "-n", "sluice-system", "--field-selector", selector)
    return sorted(e["message"] for e in events["items"])


def _admits_a_job(s: Scenario, queue: str) -> None:
    s.node(2)
    s.queue(queue)
    s.job(f"{queue}-job", queue, 1)
    s.wait_admitted(f"{queue}-job")


def test_a_bad_configuration_is_reported_and_the_last_good_one_kept(
    s: Scenario, kubectl: Kubectl, operator: Operator
) -> None:
    uid = set_scheduler_config(kubectl, "actions: enqueue, teleport\n")
    try:
        wait_for(lambda: "config-refused" in operator.logs(), what="the refusal logged")
        assert "actions.teleport" in operator.logs()
        refused = wait_for(
            lambda: _config_events(kubectl, uid, "ConfigRefused"),
            what="the ConfigRefused event on the ConfigMap",
        )
        assert "actions.teleport" in refused[-1]
        assert "last good configuration stays in use" in refused[-1]
        _admits_a_job(s, "still")
    finally:
        kubectl.run("delete", "configmap", "sluice-scheduler", "-n", "sluice-system")


def test_volcanos_default_configuration_loads_and_each_ignored_name_is_an_event(
    s: Scenario, kubectl: Kubectl, operator: Operator
) -> None:
    volcano = Path(__file__).parents[2] / "examples" / "volcano" / "volcano-scheduler.conf"
    defaults = operator.logs().count("event=config-default")
    uid = set_scheduler_config(kubectl, volcano.read_text())

    def ignored() -> list[str] | None:
        found = _config_events(kubectl, uid, "ConfigIgnored")
        return found if len(found) >= 7 else None

    try:
        messages = wait_for(ignored, what="the 7 ConfigIgnored events on the ConfigMap")
        assert len(messages) == 7, messages
        assert any(m.startswith("tiers[1].plugins[2].name: plugin predicates") for m in messages)
        assert operator.logs().count("event=config-ignored") >= 7
        _admits_a_job(s, "volcano-shaped")
    finally:
        kubectl.run("delete", "configmap", "sluice-scheduler", "-n", "sluice-system")
        wait_for(
            lambda: operator.logs().count("event=config-default") > defaults,
            what="the default configuration back in use",
        )


def test_invalid_jobs_states_never_crash_the_operator(
    s: Scenario, kubectl: Kubectl, operator: Operator
) -> None:
    with pytest.raises(KubectlError):
        kubectl.run("get", "queue", s.name("absent"))
    s.node(1)
    s.queue("alive")
    s.job("fine", "alive", 1)
    s.wait_admitted("fine")
    assert operator.process.poll() is None


def test_a_job_that_loses_its_queue_label_stops_holding_quota(
    s: Scenario, kubectl: Kubectl
) -> None:
    """Without the webhooks nothing stops an admin from dropping the label; the operator's
    server-side filtered watch reports it as gone, and the quota it held is free again."""
    s.node(4)
    s.queue("relabel", capability={s.resource: "2"})
    s.job("holder", "relabel", 2)
    s.wait_admitted("holder")
    s.job("next", "relabel", 2)
    wait_for(lambda: s.annotation("next", "pending-reason"), what="next's pending reason")
    kubectl.run("label", "job", "holder", "-n", s.namespace, "sluice.dev/queue-name-")
    s.wait_admitted("next")
