"""A workload admitted smaller: its size fields lowered in the patch that releases it, with
the record of what they were, and put back once it is suspended again (docs/elastic.md,
*Admitted smaller*)."""

from __future__ import annotations

import copy
import json
from typing import Any

from workload_fixtures import merge_patch, objects

from sluice.api.admitted_size import SizeRecord, size_record_text
from sluice.api.constants import ADMITTED_SIZE_ANNOTATION as RECORD
from sluice.api.workloads.job import JOB
from sluice.api.workloads.kubeflow import PYTORCH_JOB
from sluice.api.workloads.model import Adapter
from sluice.api.workloads.rayjob import RAY_JOB
from sluice.api.workloads.size_patches import (
    size_admission_patch,
    size_growth_patch,
    size_restore_patch,
    size_shrink_patch,
)

RECORD_8 = SizeRecord("main", 8, 8)
PYTORCHJOBS = objects("pytorchjobs.yaml")
RAYJOBS = objects("rayjobs.yaml")


def job(parallelism: int = 8, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ns", "annotations": {"a": "b"}},
        "spec": {
            "suspend": True,
            "parallelism": parallelism,
            "template": {"spec": {"containers": [{"name": "c"}]}},
            **spec,
        },
    }


def admitted(obj: dict[str, Any], adapter: Adapter, sizes: Any) -> dict[str, Any]:
    """The object as the release leaves it: the size patch applied, and no longer held."""
    patch = size_admission_patch(sizes, obj, adapter)
    return merge_patch(merge_patch(obj, patch), adapter.suspend_patch(False))


def restored(obj: dict[str, Any], adapter: Adapter) -> dict[str, Any]:
    """The object suspended again, then given its sizes back."""
    held = merge_patch(obj, adapter.suspend_patch(True))
    patch = size_restore_patch(held, adapter)
    assert patch is not None
    return merge_patch(held, patch)


def record(obj: dict[str, Any]) -> Any:
    return json.loads(obj["metadata"]["annotations"][RECORD])


def test_a_job_admitted_smaller_runs_fewer_pods_and_gets_them_back() -> None:
    obj = job()
    patch = size_admission_patch((("main", 8, 6),), obj, JOB)
    assert patch == {
        "spec": {"parallelism": 6},
        "metadata": {
            "annotations": {
                RECORD: '{"main":{"admitted":6,"asked":8,"fields":{"spec.parallelism":8}}}'
            }
        },
    }
    running = admitted(obj, JOB, (("main", 8, 6),))
    back = restored(running, JOB)
    assert back["spec"]["parallelism"] == 8
    assert back["metadata"]["annotations"] == {"a": "b"}


def test_an_indexed_gang_shrinks_its_completions_with_its_parallelism() -> None:
    obj = job(completions=8, completionMode="Indexed")
    running = admitted(obj, JOB, (("main", 8, 6),))
    assert (running["spec"]["parallelism"], running["spec"]["completions"]) == (6, 6)
    assert record(running)["main"]["fields"] == {"spec.completions": 8, "spec.parallelism": 8}
    back = restored(running, JOB)
    assert (back["spec"]["parallelism"], back["spec"]["completions"]) == (8, 8)


def test_other_jobs_keep_their_completions() -> None:
    for spec in ({"completions": 16, "completionMode": "Indexed"}, {"completions": 8}, {}):
        running = admitted(job(**spec), JOB, (("main", 8, 6),))
        assert running["spec"]["parallelism"] == 6
        assert running["spec"].get("completions") == spec.get("completions")


def test_the_whole_size_writes_its_record_only_and_suspended_drops_it() -> None:
    # A resizable workload admitted whole is recorded, as its growth is counted from it.
    obj = job()
    patch = size_admission_patch((("main", 8, 8),), obj, JOB)
    assert patch == {"metadata": {"annotations": {RECORD: size_record_text([RECORD_8])}}}
    running = admitted(obj, JOB, (("main", 8, 8),))
    assert running["spec"]["parallelism"] == 8
    back = restored(running, JOB)
    assert back["spec"] == merge_patch(obj, JOB.suspend_patch(True))["spec"]
    assert RECORD not in back["metadata"]["annotations"]
    assert size_admission_patch((), job(), JOB) == {}


def test_an_admitted_growth_raises_the_record_and_keeps_what_was_lowered() -> None:
    running = admitted(job(), JOB, (("main", 8, 6),))
    grown = merge_patch(running, size_growth_patch((("main", 10, 10),), running))
    assert record(grown) == {
        "main": {"admitted": 10, "asked": 10, "fields": {"spec.parallelism": 8}}
    }
    assert size_growth_patch((("main", 10, 10),), job()) == {}  # no record: suspended since


def test_a_shrink_lowers_a_running_gang_and_a_requeue_gives_its_size_back() -> None:
    # An Indexed gang admitted whole at 8, shrunk to 6 by reclaim while it runs.
    running = admitted(job(completions=8, completionMode="Indexed"), JOB, (("main", 8, 8),))
    shrunk = merge_patch(running, size_shrink_patch((("main", 8, 6),), running, JOB))
    assert (shrunk["spec"]["parallelism"], shrunk["spec"]["completions"]) == (6, 6)
    assert shrunk["spec"]["suspend"] is False
    assert record(shrunk) == {
        "main": {
            "admitted": 6,
            "asked": 8,
            "fields": {"spec.completions": 8, "spec.parallelism": 8},
        }
    }
    again = merge_patch(shrunk, size_shrink_patch((("main", 8, 5),), shrunk, JOB))
    assert record(again)["main"]["fields"] == {"spec.completions": 8, "spec.parallelism": 8}
    back = restored(again, JOB)
    assert (back["spec"]["parallelism"], back["spec"]["completions"]) == (8, 8)
    assert size_shrink_patch((("main", 8, 6),), job(), JOB) == {}  # no record: suspended since


def test_a_pytorchjob_runs_fewer_workers() -> None:
    obj = copy.deepcopy(PYTORCHJOBS["elastic-resnet"])
    running = admitted(obj, PYTORCH_JOB, (("Worker", 2, 1),))
    assert running["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 1
    back = restored(running, PYTORCH_JOB)
    assert back["spec"]["pytorchReplicaSpecs"] == obj["spec"]["pytorchReplicaSpecs"]


def test_a_ray_group_runs_fewer_replicas_of_its_hosts() -> None:
    obj = copy.deepcopy(RAYJOBS["own-submitter"])
    group = obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    group["replicas"], group["minReplicas"] = 3, 2
    group["template"].setdefault("metadata", {})["annotations"] = {
        "sluice.dev/min-parallelism": "1"
    }
    # 3 replicas of 2 hosts, admitted at 2 pods: 1 replica, and minReplicas lowered with it,
    # or KubeRay would keep 2 replicas running.
    patch = size_admission_patch((("wide", 6, 2),), obj, RAY_JOB)
    (written,) = patch["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert (written["replicas"], written["minReplicas"]) == (1, 1)
    assert written["template"] == group["template"]  # a list item is written whole
    running = admitted(obj, RAY_JOB, (("wide", 6, 2),))
    assert record(running)["wide"] == {
        "admitted": 2,
        "asked": 6,
        "fields": {
            "spec.rayClusterSpec.workerGroupSpecs[0].minReplicas": 2,
            "spec.rayClusterSpec.workerGroupSpecs[0].replicas": 3,
        },
    }
    back = restored(running, RAY_JOB)
    assert back["spec"] == {**obj["spec"], "suspend": True}


def test_a_field_its_owner_changed_since_is_left_as_the_owner_wrote_it() -> None:
    running = admitted(job(), JOB, (("main", 8, 6),))
    held = merge_patch(running, {"spec": {"suspend": True, "parallelism": 3}})
    patch = size_restore_patch(held, JOB)
    assert patch is not None
    assert merge_patch(held, patch)["spec"]["parallelism"] == 3
    assert RECORD not in merge_patch(held, patch)["metadata"]["annotations"]


def test_nothing_is_put_back_while_it_runs_or_when_nothing_was_lowered() -> None:
    running = admitted(job(), JOB, (("main", 8, 6),))
    assert size_restore_patch(running, JOB) is None
    assert size_restore_patch(job(), JOB) is None


def test_the_restore_joins_the_write_it_goes_with() -> None:
    running = admitted(job(), JOB, (("main", 8, 6),))
    held = merge_patch(running, JOB.suspend_patch(True))
    base = {"metadata": {"annotations": {"sluice.dev/pending-reason": "position 1 in q; x"}}}
    patch = size_restore_patch(held, JOB, base)
    assert patch is not None
    assert patch["metadata"]["annotations"] == {
        "sluice.dev/pending-reason": "position 1 in q; x",
        RECORD: None,
    }
    assert patch["spec"] == {"parallelism": 8}
