"""Feeding a DashboardView from a cluster for ``sluice dashboard``: Queues and managed Jobs,
each through the one list-and-watch (``sluice.kube.watch``) in a daemon thread."""

from __future__ import annotations

import threading
from functools import partial

from kubernetes import client

from sluice.api.constants import GROUP, PLURAL, QUEUE_LABEL, VERSION
from sluice.dashboard.view import DashboardView
from sluice.kube.watch import ListWatch


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
        for one in self.watches:
            one.stop = self.stop  # one flag stops both

    def start(self) -> None:
        for one in self.watches:
            one.start()
