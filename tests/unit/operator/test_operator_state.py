"""The operator's pure parts: its view of the cluster, status diffing, Kopf's connection."""

from __future__ import annotations

from datetime import UTC, datetime

import kopf
from kubernetes import client

from sluice.api.conditions import status_differs
from sluice.api.constants import QUEUE_FINALIZER
from sluice.api.resources import Resources
from sluice.kube.watch import PAGE
from sluice.operator.echoes import Echoes
from sluice.operator.handlers import build_registry, configure_settings, connection_info
from sluice.operator.state import ClusterState
from sluice.operator.status import over_capability_event, queue_status
from sluice.scheduler.model import QueueResult
from sluice.scheduler.snapshot import KINDS, readers

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def obj(name: str, version: int, **extra: object) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(version)}, **extra}


def test_an_older_event_never_undoes_the_loops_own_write() -> None:
    state = ClusterState()
    state.remember_workload(obj("j", 7, spec={"suspend": False}))
    state.on_workload("MODIFIED", obj("j", 5, spec={"suspend": True}))
    assert state.workloads["ns/j"]["spec"] == {"suspend": False}
    state.on_workload("MODIFIED", obj("j", 9, spec={"suspend": True}))
    assert state.workloads["ns/j"]["spec"] == {"suspend": True}
    state.on_workload("DELETED", obj("j", 10))
    assert "ns/j" not in state.workloads
    assert state.wake.is_set()


def queued_job(version: int, **extra: object) -> dict[str, object]:
    job = obj("j", version, **extra)
    job["metadata"]["labels"] = {"sluice.dev/queue-name": "team"}  # type: ignore[index]
    return job


def test_the_watch_echoing_our_own_write_does_not_wake_the_loop_again() -> None:
    state = ClusterState()
    written = queued_job(7, spec={"suspend": False})
    state.remember_workload(written)
    assert state.wake.is_set() and not state.urgent.is_set()  # that cycle counted it
    state.wake.clear()
    state.on_workload("MODIFIED", dict(written))  # the same resourceVersion: the same object
    assert not state.wake.is_set()
    state.on_workload("MODIFIED", queued_job(8, spec={"suspend": False, "parallelism": 3}))
    assert state.wake.is_set() and state.urgent.is_set()


def test_each_own_write_is_timed_once_until_its_watch_brings_it_back() -> None:
    echoes: list[float] = []
    clock = iter([100.0, 101.5, 200.0, 203.0, 300.0, 301.0, 302.0])
    state = ClusterState(echo=echoes.append, clock=lambda: next(clock))
    state.remember_workload(queued_job(7, spec={"suspend": False}))  # landed at 100
    state.on_workload("MODIFIED", queued_job(6))  # an older event: not the echo
    assert echoes == []
    state.on_workload("MODIFIED", queued_job(7, spec={"suspend": False}))  # seen at 101.5
    state.on_workload("MODIFIED", queued_job(8))  # no write of ours awaits it
    assert echoes == [1.5]
    state.remember_queue(obj("q", 3, kind="Queue"))  # landed at 200
    state.on_queue("MODIFIED", obj("q", 4, kind="Queue"))  # a newer one passes it: 3 s
    assert echoes == [1.5, 3.0]
    state.echoes = Echoes(state.lock, echoes.append, lambda: next(clock), most=2)
    for name, version in (("a", 1), ("b", 1), ("c", 1)):
        state.remember_workload(obj(name, version))  # landed at 300, 301, 302
    assert list(state.echoes.awaited) == ["Job/ns/b", "Job/ns/c"]  # at most two: the oldest go


def test_a_write_its_watch_brought_back_before_its_answer_was_stored_waited_not_at_all() -> None:
    echoes: list[float] = []
    state = ClusterState(echo=echoes.append, clock=lambda: 5.0)
    state.on_workload("MODIFIED", queued_job(7, spec={"suspend": False}))  # the watch, first
    state.remember_workload(queued_job(7, spec={"suspend": False}))  # then the write's answer
    assert echoes == [0.0]
    assert not state.echoes.awaited  # nothing left to wait for until a later event passes it


def test_only_what_may_let_a_job_in_wakes_the_loop_at_once() -> None:
    state = ClusterState()
    state.on_workload("ADDED", queued_job(1, spec={"suspend": True}))
    assert state.urgent.is_set()  # a new job
    state.on_workload("MODIFIED", queued_job(2, spec={"suspend": False}))
    state.wake.clear()
    state.urgent.clear()
    state.on_workload("MODIFIED", queued_job(3, spec={"suspend": False}, status={"ready": 0}))
    assert not state.wake.is_set()  # reads as it did: no cycle looks at it
    state.on_workload("MODIFIED", queued_job(4, spec={"suspend": False}, status={"active": 1}))
    assert state.wake.is_set() and not state.urgent.is_set()  # its pods run: statuses only
    done = {"active": 0, "conditions": [{"type": "Complete", "status": "True"}]}
    state.on_workload("MODIFIED", queued_job(5, spec={"suspend": False}, status=done))
    assert state.urgent.is_set()  # its quota is free

    waiting = queued_job(10, spec={"suspend": True})
    state.on_workload("ADDED", {**waiting, "metadata": {**waiting["metadata"], "name": "w"}})
    state.wake.clear()
    state.urgent.clear()
    explained = queued_job(11, spec={"suspend": True})
    reason = {"sluice.dev/pending-reason": "position 1 in team"}
    explained["metadata"] = {**explained["metadata"], "name": "w", "annotations": reason}  # type: ignore[dict-item]
    state.on_workload("MODIFIED", explained)  # its reason written: decides nothing
    assert state.wake.is_set() and not state.urgent.is_set()
    assert "ns/w" in (state.stores.workloads.changes.take() or {})  # yet the decision pass is told

    pod = {"metadata": {"name": "p", "namespace": "ns", "resourceVersion": "6"},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
           "status": {"phase": "Pending"}}  # fmt: skip
    state.urgent.clear()
    state.on_pod("ADDED", pod)
    bound = {**pod, "metadata": {**pod["metadata"], "resourceVersion": "7"},
             "spec": {**pod["spec"], "nodeName": "n1"}}  # fmt: skip
    state.on_pod("MODIFIED", bound)
    assert state.wake.is_set() and not state.urgent.is_set()  # it only takes room
    finished = {**bound, "metadata": {**pod["metadata"], "resourceVersion": "8"},
                "status": {"phase": "Succeeded"}}  # fmt: skip
    state.on_pod("MODIFIED", finished)
    assert state.urgent.is_set()  # its room is free


def test_a_queue_change_no_cycle_looks_at_does_not_wake_the_loop() -> None:
    state = ClusterState()
    state.on_queue("ADDED", obj("team", 5, spec={"parent": "root"}))
    state.wake.clear()
    state.remember_queue(obj("team", 6, spec={"parent": "root"}, status={"pending": 3}))
    held = {"finalizers": ["sluice.dev/subtree"]}  # the Queue reconciler's own write
    state.on_queue(
        "MODIFIED",
        {**obj("team", 7, spec={"parent": "root"}), "metadata": {"name": "team", **held,
                                                               "resourceVersion": "7"}},
    )  # fmt: skip
    assert not state.wake.is_set()
    assert state.queues["team"]["metadata"]["resourceVersion"] == "7"  # still stored
    state.on_queue("MODIFIED", obj("team", 8, spec={"parent": "root", "state": "Closed"}))
    assert state.wake.is_set()
    state.wake.clear()
    closed = {"name": "team", "resourceVersion": "9",
              "annotations": {"sluice.dev/closed-by-parent": "dept"}}  # fmt: skip
    state.on_queue("MODIFIED", {"metadata": closed, "spec": {"parent": "root", "state": "Closed"}})
    assert state.wake.is_set()


def test_a_queue_read_again_with_the_same_spec_keeps_the_very_spec_object() -> None:
    """The decision pass compares every queue's spec by identity first: each status written
    must not give the next pass a new spec to compare field by field."""
    state = ClusterState()
    spec = {"parent": "root", "weight": 2, "capability": {"cpu": "4"}}
    state.on_queue("ADDED", obj("team", 5, spec=spec))
    first = state.reads["Queue"]["team"].view
    state.remember_queue(obj("team", 6, spec=dict(spec), status={"pending": 3}))
    state.on_queue("MODIFIED", obj("team", 7, spec=dict(spec), status={"pending": 4}))
    now = state.reads["Queue"]["team"].view
    assert now is not first and now.status.pending == 4  # the status read anew
    assert now.spec is first.spec
    state.on_queue("MODIFIED", obj("team", 8, spec={**spec, "weight": 3}))
    changed = state.reads["Queue"]["team"].view
    assert changed.spec is not first.spec and changed.spec.weight == 3


def test_a_late_answer_to_our_own_write_never_brings_a_deleted_object_back() -> None:
    state = ClusterState()
    state.on_queue("ADDED", obj("child", 5, spec={"parent": "dept"}))
    # The finalizer release races the watch: the deletion is seen first, the answer later.
    state.on_queue("DELETED", obj("child", 9))
    state.remember_queue(obj("child", 8, spec={"parent": "dept"}))
    assert "child" not in state.queues
    state.on_queue("ADDED", obj("child", 12, spec={"parent": "root"}))  # created again
    assert state.queues["child"]["spec"] == {"parent": "root"}


def test_an_answer_showing_the_last_finalizer_gone_removes_the_object() -> None:
    state = ClusterState()
    state.on_queue("ADDED", obj("q", 5))
    released = obj("q", 6)
    released["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"  # type: ignore[index]
    released["metadata"]["finalizers"] = []  # type: ignore[index]
    state.remember_queue(released)
    assert "q" not in state.queues
    state.on_queue("MODIFIED", obj("q", 6))  # the watch's copy of that same version
    assert "q" not in state.queues


def test_unreadable_objects_are_left_out_and_reported() -> None:
    state = ClusterState()
    state.on_queue("ADDED", {"metadata": {"name": "root"}})
    state.on_queue("ADDED", {"metadata": {"name": "bad"}, "spec": {"weight": 0}})
    state.on_workload(
        "ADDED",
        {
            "metadata": {"name": "j", "namespace": "ns", "labels": {"sluice.dev/queue-name": "q"}},
            "spec": {
                "template": {
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "x"}}}]}
                }
            },
        },
    )
    taken = state.snapshot(NOW, 5)
    assert [q.name for q in taken.snapshot.queues] == ["root"]
    assert taken.snapshot.workloads == []
    assert set(taken.unreadable) == {"queue/bad", "job/ns/j"}


def test_a_listing_forgets_only_what_it_missed_though_stored_before_it() -> None:
    state = ClusterState()
    for name, version in (("kept", 5), ("deleted-unseen", 6), ("created-since", 12)):
        state.on_workload("ADDED", obj(name, version))
    state.on_pod("ADDED", obj("p", 7))
    listed = {"ns/kept"}  # a listing at version 10
    assert state.unlisted("Job", listed, 10) == ["ns/deleted-unseen"]
    assert state.unlisted("Pod", listed, 10) == ["ns/p"]
    assert state.unlisted("JobSet", listed, 10) == []  # another kind's keys are not its own
    assert sorted(state.unlisted("Job", listed, None)) == ["ns/created-since", "ns/deleted-unseen"]


def test_the_latest_views_list_only_the_workloads_they_can_answer_for() -> None:
    state = ClusterState()
    state.on_workload("ADDED", queued_job(3, spec={"suspend": True}))
    bad = {"cpu": "x"}  # a request no quantity reads: the workload is stored, with no view
    broken = obj("k", 4, spec={"template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": bad}}]}}})  # fmt: skip
    broken["metadata"]["labels"] = {"sluice.dev/queue-name": "team"}  # type: ignore[index]
    state.on_workload("ADDED", broken)
    views = state.workload_views
    assert set(state.workloads) == {"ns/j", "ns/k"}
    assert list(views) == ["ns/j"] and len(views) == 1
    assert views.get("ns/k") is None and views["ns/j"].name == "j"
    assert all(views[key] is not None for key in views)


def test_plain_pods_join_the_snapshot_as_the_workloads_they_form() -> None:
    state = ClusterState()

    def pod(name: str, version: int) -> dict[str, object]:
        gated = {"containers": [], "schedulingGates": [{"name": "sluice.dev/admission"}]}
        found = obj(name, version, spec=gated)
        found["metadata"] |= {"uid": f"u-{name}", "labels": {"sluice.dev/queue-name": "team"}}  # type: ignore[operator]
        return found

    state.on_pod("ADDED", pod("a", 3))
    state.on_pod("ADDED", pod("b", 4))
    state.on_pod("ADDED", obj("outside", 5, spec={"containers": []}))
    taken = state.snapshot(NOW, 5)
    assert [j.key for j in taken.snapshot.workloads] == ["ns/pod/a", "ns/pod/b"]
    assert sorted(taken.pod_workloads) == ["ns/pod/a", "ns/pod/b"]
    state.on_pod("DELETED", pod("a", 6))
    assert [j.key for j in state.snapshot(NOW, 5).snapshot.workloads] == ["ns/pod/b"]


def test_status_is_written_only_when_something_a_reader_sees_changes() -> None:
    result = QueueResult(
        state="Open",
        parent="root",
        weight=1,
        priority=0,
        allocated=Resources({"cpu": 2000}),
        deserved=Resources({"cpu": 4000}),
        share=0.5,
        pending=1,
        inqueue=1,
    )
    queue = {"metadata": {"name": "q", "generation": 3}}
    first = queue_status(queue, result, NOW)
    assert first["allocated"] == {"cpu": "2"} and first["observedGeneration"] == 3
    assert first["conditions"][0]["status"] == "True"
    stored = {**queue, "status": first}
    later = queue_status(stored, result, datetime(2026, 6, 1, tzinfo=UTC))
    assert not status_differs(first, later)  # only the transition time would differ
    assert later["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    broken = QueueResult(
        state="Open",
        parent="root",
        weight=1,
        priority=0,
        valid=False,
        invalid_reason="queue q: cycle",
    )
    changed = queue_status(stored, broken, NOW)
    assert status_differs(first, changed)
    assert changed["conditions"][0]["message"] == "queue q: cycle"


def test_kopf_connects_with_the_same_credentials_as_the_client() -> None:
    cfg = client.Configuration()
    cfg.host = "https://127.0.0.1:6443"
    cfg.ssl_ca_cert = "/ca.crt"
    cfg.api_key = {"authorization": "Bearer abc"}
    info = connection_info(client.ApiClient(cfg))
    assert (info.server, info.ca_path, info.scheme, info.token) == (
        "https://127.0.0.1:6443",
        "/ca.crt",
        "Bearer",
        "abc",
    )


def test_kopf_watches_no_workload_nor_pod_and_writes_nothing_of_its_own() -> None:
    settings = kopf.OperatorSettings()
    configure_settings(settings)
    jobs, pods = kopf.Resource("batch", "v1", "jobs"), kopf.Resource("", "v1", "pods")
    nodes = kopf.Resource("", "v1", "nodes")
    registry = build_registry(ClusterState(), client.ApiClient())
    # The workloads and the pods are watched from the operator's own listing (watches.py).
    assert not any(registry._watching.has_handlers(resource=r) for r in (jobs, pods))
    assert registry._watching.has_handlers(resource=nodes)
    # Never the Queues' subtree finalizer: Kopf takes its own off where no handler needs it.
    assert settings.persistence.finalizer.startswith("sluice.dev/")
    assert settings.persistence.finalizer != QUEUE_FINALIZER
    assert not settings.posting.enabled
    assert settings.scanning.disabled
    assert settings.watching.chunk_size == PAGE  # the first listing in pages, not whole
    # No change handlers, so no last-handled essence: none built from events, none stored.
    resources = [jobs, nodes, kopf.Resource("scheduling.sluice.dev", "v1beta1", "queues")]
    assert not any(registry._changing.has_handlers(resource=r) for r in resources)
    job = kopf.Body({"metadata": {"name": "j", "labels": {"a": "b"}}, "spec": {"x": 1}})
    assert settings.persistence.diffbase_storage.build(body=job) == {}
    assert settings.persistence.diffbase_storage.fetch(body=job) is None
    progress = settings.persistence.progress_storage
    patch = kopf.Patch()
    progress.touch(body=job, patch=patch, value="x")
    assert progress.fetch(key=kopf.HandlerId("h"), body=job) is None and not patch


def test_the_connection_pool_holds_every_parallel_writer_of_both_passes() -> None:
    from sluice.kube.writer import WRITERS
    from sluice.operator.run import _with_room_for_writers

    small = client.Configuration()
    small.connection_pool_maxsize = 5  # what a one-CPU pod gets by default
    grown = _with_room_for_writers(client.ApiClient(small))
    assert grown.rest_client.pool_manager.connection_pool_kw["maxsize"] > 2 * WRITERS
    big = client.Configuration()
    big.connection_pool_maxsize = 50
    kept = client.ApiClient(big)
    assert _with_room_for_writers(kept) is kept


def test_a_limit_range_change_reads_its_namespaces_workloads_again() -> None:
    state = ClusterState()
    state.readers = readers(defaults_of=state.pod_defaults.of)
    job = queued_job(1, spec={"template": {"spec": {"containers": [{"name": "c"}]}}})
    state.on_workload("ADDED", job)
    assert state.snapshot(NOW, 5).snapshot.workloads[0].request == Resources()
    state.wake.clear()
    limits = {
        "metadata": {"name": "d", "namespace": "ns", "resourceVersion": "3"},
        "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "2"}}]},
    }
    state.on_limit_range("ADDED", limits)
    assert state.wake.is_set()
    assert state.snapshot(NOW, 5).snapshot.workloads[0].request == Resources.parse({"cpu": "2"})
    state.wake.clear()
    other = {**limits, "metadata": {**limits["metadata"], "namespace": "elsewhere"}}
    state.on_limit_range("ADDED", other)
    assert not state.wake.is_set()  # no workload there
    state.on_limit_range("DELETED", limits)
    assert state.snapshot(NOW, 5).snapshot.workloads[0].request == Resources()


def test_a_queue_over_its_capability_says_so_in_its_status_and_once_in_an_event() -> None:
    over = "memory 5Gi > capability 4Gi; pods ask more than admitted: ns/w memory 1Gi"
    fine = QueueResult(state="Open", parent="root", weight=1, priority=0)
    grown = QueueResult(state="Open", parent="root", weight=1, priority=0, over_capability=over)
    queue = {"metadata": {"name": "q", "generation": 1}}
    within = queue_status(queue, fine, NOW)
    assert within["overCapability"] is None
    condition = within["conditions"][1]
    assert (condition["type"], condition["status"]) == ("OverCapability", "False")
    stored = {**queue, "status": within}
    now_over = queue_status(stored, grown, NOW)
    assert status_differs(within, now_over)
    assert now_over["overCapability"] == over
    assert now_over["conditions"][1]["status"] == "True"
    assert now_over["conditions"][1]["message"] == over
    told = over_capability_event(within, now_over)
    assert told == ("OverCapability", f"holds more than its capability: {over}", True)
    assert over_capability_event(now_over, now_over) is None  # told once, not every write
    assert over_capability_event(now_over, within) == (
        "WithinCapability",
        "holds no more than its capability again",
        False,
    )


def test_a_stored_object_leaves_the_servers_field_ownership_out_and_reads_the_same() -> None:
    state = ClusterState()
    owners = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}]
    job = queued_job(3, spec={"suspend": True})
    job["metadata"]["managedFields"] = owners  # type: ignore[index]
    state.on_workload("ADDED", job)
    kept = state.workloads["ns/j"]
    assert "managedFields" not in kept["metadata"]
    assert kept["metadata"]["resourceVersion"] == "3" and kept["spec"] == {"suspend": True}
    assert job["metadata"]["managedFields"] is owners  # type: ignore[index]  # not changed
    bare = ClusterState()
    bare.on_workload("ADDED", queued_job(3, spec={"suspend": True}))
    assert state.reads["Job"]["ns/j"] == bare.reads["Job"]["ns/j"]


def test_a_stored_workload_is_kept_as_its_text_and_each_read_is_a_copy() -> None:
    """A parsed Job takes several times the bytes of its JSON, and the operator keeps every
    workload: it keeps the text, with the resourceVersion each event compares with."""
    state = ClusterState()
    state.on_workload("ADDED", queued_job(3, spec={"suspend": True}))
    kept = state.workloads.packed("ns/j")
    assert kept is not None and isinstance(kept.text, str) and kept.version == 3
    read = state.workloads["ns/j"]
    read["spec"]["suspend"] = False  # a caller's copy: what is stored stays as it was
    assert state.workloads["ns/j"]["spec"] == {"suspend": True}
    state.on_workload("MODIFIED", queued_job(2, spec={"suspend": False}))  # older: ignored
    assert state.workloads.packed("ns/j") is kept
    state.on_workload("DELETED", queued_job(4, spec={"suspend": True}))
    assert "ns/j" not in state.workloads and state.workloads.version("ns/j") is None


def test_every_kind_a_snapshot_is_built_from_has_one_store_of_its_own() -> None:
    """A kind added to the snapshot's kinds needs a store (``stores.py``): its reads are
    where the snapshot takes them from, and its deletions bury their own tombstones."""
    state = ClusterState()
    holders = {kind: [s.name for s in state.stores if kind in s.kinds] for kind in KINDS}
    assert all(len(names) == 1 for names in holders.values()), holders
    # Besides them, the RayClusters of RayJobs, read into their RayJobs' views.
    assert set(state.reads) == {*KINDS, "RayCluster"}
    names = [store.name for store in state.stores]
    assert len(set(names)) == len(names)
    # Forgetting a Node does not bury a Namespace of the same name.
    state.on_node("ADDED", {"metadata": {"name": "a", "resourceVersion": "3"}})
    state.on_node("DELETED", {"metadata": {"name": "a", "resourceVersion": "4"}})
    state.on_namespace("ADDED", {"metadata": {"name": "a", "resourceVersion": "2"}})
    assert "a" in state.reads["Namespace"] and "a" not in state.reads["Node"]


def test_claim_templates_classes_and_named_claims_read_the_workloads_again() -> None:
    state = ClusterState()
    state.readers = readers(defaults_of=state.pod_defaults.of)
    claims = [{"name": "gpus", "resourceClaimTemplateName": "four"}]
    spec = {"containers": [{"name": "c"}], "resourceClaims": claims}
    state.on_workload("ADDED", queued_job(1, spec={"template": {"spec": spec}}))
    waiting = state.snapshot(NOW, 5).snapshot.workloads[0]
    assert "ResourceClaimTemplate ns/four does not exist" in waiting.devices_unknown
    implicit = "deviceclass.resource.kubernetes.io/gpu"
    device_class = {"metadata": {"name": "gpu", "resourceVersion": "2"}, "spec": {}}
    template = {
        "metadata": {"name": "four", "namespace": "ns", "resourceVersion": "3"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "count": 4}}]
                }
            }
        },
    }
    state.on_device_class("ADDED", device_class)
    state.wake.clear()
    state.on_claim_template("ADDED", template)
    assert state.wake.is_set()
    counted = state.snapshot(NOW, 5).snapshot.workloads[0]
    assert counted.devices_unknown == ""
    assert counted.request == Resources.parse({implicit: "4"})
    # Deleted and created again asking more: the workload asks what its pods now will.
    state.on_claim_template("DELETED", template)
    assert state.snapshot(NOW, 5).snapshot.workloads[0].devices_unknown
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]  # type: ignore[index]
    exactly["count"] = 8
    template["metadata"]["resourceVersion"] = "5"  # type: ignore[index]
    state.on_claim_template("ADDED", template)
    assert state.snapshot(NOW, 5).snapshot.workloads[0].request == Resources.parse({implicit: "8"})
    # The mapping in the scheduler configuration renames what every device counts as.
    from sluice.api.config import parse_scheduler_config

    mapped = [{"name": "example.com/gpu", "deviceClassNames": ["gpu"]}]
    state.set_config(parse_scheduler_config({"deviceClassMappings": mapped}))
    assert state.snapshot(NOW, 5).snapshot.workloads[0].request == Resources.parse(
        {"example.com/gpu": "8"}
    )
