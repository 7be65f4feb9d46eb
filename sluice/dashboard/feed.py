"""Feeding a DashboardView from a cluster for ``sluice dashboard``: Queues and managed Jobs,
and for the domain view the Topologies, nodes and bound pods, each through the one
list-and-watch (``sluice.kube.watch``) in a daemon thread."""

from __future__ import annotations

import threading
from functools import partial

from kubernetes import client

from sluice.api.constants import GROUP, PLURAL, QUEUE_LABEL, TOPOLOGY_PLURAL, VERSION
from sluice.dashboard.domains import Watched
from sluice.dashboard.view import DashboardView
from sluice.kube.watch import ListWatch

BOUND_PODS = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
"""The pods that take room on a node."""


class Feed:
    def __init__(self, api: client.ApiClient, view: DashboardView) -> None:
        self.stop = threading.Event()
        objects = client.CustomObjectsApi(api)

        self.watches = [
            ListWatch(
                "dashboard-queues",
                partial(objects.list_cluster_custom_object, GROUP, VERSION, PLURAL),
                lambda items: view.load(items, []),
                view.on_queue,
            ),
            ListWatch(
                "dashboard-jobs",
                partial(objects.list_cluster_custom_object, "batch", "v1", "jobs"),
                lambda items: view.load([], items),
                view.on_job,
                label_selector=QUEUE_LABEL,
            ),
        ]
        watched = view.cluster = Watched()
        core = client.CoreV1Api(api)
        for kind, call, fields in (
            ("Topology", partial(objects.list_cluster_custom_object, GROUP, VERSION,
                                 TOPOLOGY_PLURAL), ""),
            ("Node", core.list_node, ""),
            ("Pod", core.list_pod_for_all_namespaces, BOUND_PODS),
        ):  # fmt: skip
            self.watches.append(
                ListWatch(
                    f"dashboard-{kind.lower()}",
                    call,
                    partial(watched.on_listing, kind),
                    partial(watched.on_event, kind),
                    field_selector=fields,
                )
            )
        for one in self.watches:
            one.stop = self.stop  # one flag stops them all

    def start(self) -> None:
        for one in self.watches:
            one.start()
