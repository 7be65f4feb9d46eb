"""Kubernetes client configuration shared by the operator, the webhooks and the CLI."""

from __future__ import annotations

import os

from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException


class KubeConfigError(RuntimeError):
    """No usable cluster configuration; the message says what was tried."""


def api_client(kubeconfig: str | None = None) -> client.ApiClient:
    """A client for the given kubeconfig, else $KUBECONFIG / ~/.kube/config, else in-cluster."""
    path = kubeconfig or os.environ.get("KUBECONFIG")
    try:
        if path:
            return config.new_client_from_config(config_file=path)
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            cfg = client.Configuration()
            config.load_incluster_config(client_configuration=cfg)
            return client.ApiClient(cfg)
        return config.new_client_from_config()
    except (ConfigException, OSError) as err:
        where = path or "~/.kube/config or the in-cluster service account"
        raise KubeConfigError(f"cannot load a cluster configuration from {where}: {err}") from None
