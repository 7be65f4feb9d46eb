"""Each kind's pod sets, counted on examples shaped like the kind's own published ones."""

from __future__ import annotations

import copy

import pytest
from workload_fixtures import objects

from sluice.api.constraints import Toleration
from sluice.api.errors import InvalidObject
from sluice.api.pod_views import pod_from_object
from sluice.api.resources import Resources
from sluice.api.views import JobPhase, WorkloadView
from sluice.api.workloads import POD_LABELS, workload_from_object
from sluice.api.workloads.jobset import JOBSET
from sluice.api.workloads.kubeflow import MPI_JOB, PYTORCH_JOB
from sluice.api.workloads.rayjob import RAY_JOB
from sluice.api.workloads.trainjob import TRAIN_JOB

JOBSETS = objects("jobsets.yaml")
TRAINJOBS = objects("trainjobs.yaml")
PYTORCHJOBS = objects("pytorchjobs.yaml")
MPIJOBS = objects("mpijobs.yaml")
RAYJOBS = objects("rayjobs.yaml")


def R(**amounts: str) -> Resources:
    """Quantities by resource name, nvidia_com__gpu standing for nvidia.com/gpu."""
    return Resources.parse({k.replace("__", "/").replace("_", "."): v for k, v in amounts.items()})


def read(obj: dict[str, object]) -> WorkloadView:
    workload = workload_from_object(obj)
    assert workload is not None
    return workload


def counts(workload: WorkloadView) -> dict[str, tuple[int, Resources]]:
    return {p.name: (p.count, p.pod.request) for p in workload.pod_sets}


def test_jobset_replicated_jobs_are_replicas_times_parallelism() -> None:
    fanout = read(JOBSETS["fanout"])
    assert counts(fanout) == {
        "workers": (4, R(cpu="2", memory="4Gi")),
        "driver": (1, R(cpu="500m")),
    }
    assert fanout.request == R(cpu="8500m", memory="16Gi")
    assert fanout.priority_class_name == "research-high"
    slices = read(JOBSETS["two-slices"])
    (slice_set,) = slices.pod_sets
    assert slice_set.count == 8 and slices.request == Resources({"google.com/tpu": 32000})
    assert dict(slice_set.pod.node_selector)["accelerator.example/type"] == "tpu-slice"
    assert slices.phase is JobPhase.PENDING and slices.priority_class_name is None


def test_jobset_counts_the_pods_a_job_runs_at_once_and_replicas_default_to_one() -> None:
    obj = copy.deepcopy(JOBSETS["fanout"])
    workers = obj["spec"]["replicatedJobs"][0]
    workers["template"]["spec"].update(parallelism=4, completions=2)
    del obj["spec"]["replicatedJobs"][1]["template"]["spec"]["parallelism"]
    workers["replicas"] = 3
    worker_set, driver_set = read(obj).pod_sets
    # Quota is held for parallelism, as for a Job; two completions start two pods per Job.
    assert (worker_set.count, worker_set.pod_count) == (12, 6)
    assert (driver_set.count, driver_set.pod_count) == (1, 1)


def test_trainjob_is_num_nodes_of_resources_per_node() -> None:
    train = read(TRAINJOBS["three-node-ddp"])
    assert counts(train) == {"node": (3, R(cpu="8", memory="32Gi", nvidia_com__gpu="2"))}
    assert train.request == R(cpu="24", memory="96Gi", nvidia_com__gpu="6")
    assert train.phase is JobPhase.PENDING and train.priority_class_name is None


@pytest.mark.parametrize("unstated", ["numNodes", "resourcesPerNode"])
def test_a_trainjob_that_leaves_its_size_to_its_runtime_is_refused(unstated: str) -> None:
    obj = copy.deepcopy(TRAINJOBS["three-node-ddp"])
    del obj["spec"]["trainer"][unstated]
    with pytest.raises(InvalidObject, match=rf"field spec\.trainer\.{unstated}: missing"):
        TRAIN_JOB.pod_sets(obj)


def test_pytorchjob_replica_types_are_replicas_times_their_template() -> None:
    nccl = read(PYTORCHJOBS["mnist-nccl"])
    gpu = R(nvidia_com__gpu="1")
    # Each worker also runs the training-operator's init container, which asks cpu 50m and
    # memory 10Mi (a pod asks the larger of its containers' sum and each init container).
    worker = R(cpu="50m", memory="10Mi", nvidia_com__gpu="1")
    assert counts(nccl) == {"Master": (1, gpu), "Worker": (3, worker)}
    assert nccl.request == R(cpu="150m", memory="30Mi", nvidia_com__gpu="4")
    assert nccl.phase is JobPhase.PENDING
    worker = nccl.pod_sets[1].pod
    assert worker.tolerations == (Toleration("gpu", "Exists", "", "NoSchedule"),)
    elastic = read(PYTORCHJOBS["elastic-resnet"])
    # An elastic job is counted at its replicas, not at elasticPolicy.maxReplicas.
    assert counts(elastic) == {"Worker": (2, R(cpu="4"))} and elastic.phase is not JobPhase.PENDING


def test_pytorchjob_replicas_default_to_one() -> None:
    obj = copy.deepcopy(PYTORCHJOBS["mnist-nccl"])
    del obj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"]
    assert [p.count for p in PYTORCH_JOB.pod_sets(obj)] == [1, 1]


def test_mpijob_is_its_launcher_and_its_workers() -> None:
    pi = read(MPIJOBS["estimate-pi"])
    one = R(cpu="1", memory="1Gi")
    assert counts(pi) == {"Launcher": (1, one), "Worker": (2, one)}
    assert pi.request == R(cpu="3", memory="3Gi") and pi.phase is JobPhase.PENDING
    bench = read(MPIJOBS["tf-bench"])
    # The launcher names no replicas (one) and no resources.
    assert counts(bench) == {"Launcher": (1, Resources()), "Worker": (4, R(nvidia_com__gpu="1"))}


def test_mpijob_workers_default_to_none() -> None:
    obj = copy.deepcopy(MPIJOBS["tf-bench"])
    del obj["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    assert [p.count for p in MPI_JOB.pod_sets(obj)] == [1, 0]


def test_rayjob_is_head_workers_and_kuberays_submitter() -> None:
    ray = read(RAYJOBS["count-to-ten"])
    assert counts(ray) == {
        "head": (1, R(cpu="1", memory="2Gi")),
        "small": (1, R(cpu="1", memory="1Gi")),
        "submitter": (1, R(cpu="500m", memory="200Mi")),
    }
    assert ray.phase is JobPhase.PENDING


def test_rayjob_workers_are_replicas_times_hosts_and_its_own_submitter() -> None:
    ray = read(RAYJOBS["own-submitter"])
    assert counts(ray) == {
        "head": (1, R(cpu="1", memory="2Gi")),
        "wide": (4, R(cpu="2", memory="4Gi")),
        "submitter": (1, R(cpu="200m", memory="128Mi")),
    }
    assert ray.request == R(cpu="9200m", memory="18560Mi")


@pytest.mark.parametrize(
    ("group", "pods"),
    [
        ({"replicas": 7, "minReplicas": 1, "maxReplicas": 4}, 4),
        ({"replicas": 0, "minReplicas": 2, "maxReplicas": 4}, 2),
        ({"minReplicas": 3}, 3),
        ({"replicas": 2, "minReplicas": 1, "maxReplicas": 4, "numOfHosts": 4}, 8),
        ({"replicas": 2, "suspend": True}, 0),
    ],
)
def test_a_ray_worker_group_starts_within_its_bounds(group: dict[str, object], pods: int) -> None:
    obj = copy.deepcopy(RAYJOBS["count-to-ten"])
    spec = obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    for key in ("replicas", "minReplicas", "maxReplicas"):
        spec.pop(key)
    spec.update(group)
    assert RAY_JOB.pod_sets(obj)[1].count == pods


def test_ray_submission_modes_and_the_autoscaler() -> None:
    obj = copy.deepcopy(RAYJOBS["count-to-ten"])
    obj["spec"]["submissionMode"] = "HTTPMode"
    assert [p.name for p in RAY_JOB.pod_sets(obj)] == ["head", "small"]
    obj["spec"]["submissionMode"] = "SidecarMode"
    head = RAY_JOB.pod_sets(obj)[0]
    assert head.pod.request == R(cpu="1500m", memory="2248Mi")
    obj["spec"]["submissionMode"] = "InteractiveMode"
    obj["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    assert RAY_JOB.pod_sets(obj)[0].pod.request == R(cpu="1500m", memory="2560Mi")
    options = {"resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}
    obj["spec"]["rayClusterSpec"]["autoscalerOptions"] = options
    assert RAY_JOB.pod_sets(obj)[0].pod.request == R(cpu="1250m", memory="2304Mi")


def test_a_rayjob_on_a_selected_cluster_is_refused() -> None:
    obj = copy.deepcopy(RAYJOBS["count-to-ten"])
    del obj["spec"]["rayClusterSpec"]
    obj["spec"]["clusterSelector"] = {"ray.io/cluster": "shared"}
    with pytest.raises(InvalidObject, match=r"field spec\.rayClusterSpec: missing"):
        RAY_JOB.pod_sets(obj)


def test_a_rayjob_that_keeps_its_cluster_is_refused() -> None:
    obj = copy.deepcopy(RAYJOBS["count-to-ten"])
    del obj["spec"]["shutdownAfterJobFinishes"]
    with pytest.raises(InvalidObject, match=r"field spec\.shutdownAfterJobFinishes: must be"):
        workload_from_object(obj)
    assert RAY_JOB.refusal(obj) == (
        "field spec.shutdownAfterJobFinishes: must be true: KubeRay holds a RayJob by"
        " spec.suspend only then (its Ray cluster goes when its job ends), and sluice holds"
        " RayJobs by spec.suspend"
    )
    assert RAY_JOB.refusal(RAYJOBS["count-to-ten"]) is None


def test_bad_counts_and_requests_name_their_field() -> None:
    obj = copy.deepcopy(PYTORCHJOBS["mnist-nccl"])
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = -1
    with pytest.raises(InvalidObject, match=r"spec\.pytorchReplicaSpecs\.Worker\.replicas"):
        PYTORCH_JOB.pod_sets(obj)
    obj = copy.deepcopy(JOBSETS["two-slices"])
    containers = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    containers["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    where = r"spec\.replicatedJobs\[0\]\.template\.spec\.template\.spec\.containers\[0\]"
    with pytest.raises(InvalidObject, match=rf"JobSet research/two-slices: field {where}"):
        JOBSET.pod_sets(obj)
    obj = copy.deepcopy(RAYJOBS["count-to-ten"])
    obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["numOfHosts"] = "two"
    with pytest.raises(InvalidObject, match=r"workerGroupSpecs\[0\]\.numOfHosts"):
        RAY_JOB.pod_sets(obj)


def test_unmanaged_objects_and_unknown_kinds_are_no_workload() -> None:
    obj = copy.deepcopy(MPIJOBS["estimate-pi"])
    del obj["metadata"]["labels"]
    assert workload_from_object(obj) is None
    workload = workload_from_object(obj, {"hpc": "hpc-default"})
    assert workload is not None and workload.queue_from_namespace
    assert workload_from_object({**obj, "apiVersion": "kubeflow.org/v1"}) is None


def test_each_kind_says_how_its_own_pods_are_found() -> None:
    assert read(JOBSETS["fanout"]).pods_by == (("jobset.sigs.k8s.io/jobset-name", "fanout"),)
    ray = copy.deepcopy(RAYJOBS["count-to-ten"])
    # No cluster yet: only KubeRay's submitter Job, named after the RayJob, can have pods.
    submitter = ("batch.kubernetes.io/job-name", "count-to-ten")
    assert read(ray).pods_by == (submitter,)
    ray["status"] = {"rayClusterName": "count-to-ten-x7k2p"}
    assert read(ray).pods_by == (("ray.io/cluster", "count-to-ten-x7k2p"), submitter)
    pod = {
        "metadata": {
            "name": "count-to-ten-x7k2p-head",
            "namespace": "analytics",
            "labels": {"ray.io/cluster": "count-to-ten-x7k2p", "app": "ray"},
        },
        "spec": {"containers": []},
    }
    assert pod_from_object(pod, POD_LABELS).named_by == (("ray.io/cluster", "count-to-ten-x7k2p"),)
    assert pod_from_object(pod).named_by == ()
