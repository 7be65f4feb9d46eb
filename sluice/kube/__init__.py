"""The client layer: configuration (here), the one reading of API errors (`errors.py`), listing
and watching (`watch.py`); shared by the operator, the webhooks, the dashboard and the CLI."""

from __future__ import annotations

import os
from typing import cast

from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException


class KubeConfigError(RuntimeError):
    """No usable cluster configuration; the message says what was tried."""


def api_client(kubeconfig: str | None = None, context: str | None = None) -> client.ApiClient:
    """A client for the given kubeconfig, else $KUBECONFIG / ~/.kube/config, else in-cluster;
    ``context`` picks a kubeconfig context other than its current one."""
    path = kubeconfig or os.environ.get("KUBECONFIG")
    try:
        if path:
            loaded = config.new_client_from_config(config_file=path, context=context)  # type: ignore[no-untyped-call]
            return cast(client.ApiClient, loaded)
        if os.environ.get("KUBERNETES_SERVICE_HOST") and not context:
            cfg = client.Configuration()
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
            return client.ApiClient(cfg)
        default = config.new_client_from_config(context=context)  # type: ignore[no-untyped-call]
        return cast(client.ApiClient, default)
    except (ConfigException, OSError) as err:
        where = path or "~/.kube/config or the in-cluster service account"
        raise KubeConfigError(f"cannot load a cluster configuration from {where}: {err}") from None


def context_namespace(kubeconfig: str | None = None, context: str | None = None) -> str:
    """The namespace of the kubeconfig context (as kubectl picks it), else "default"."""
    path = kubeconfig or os.environ.get("KUBECONFIG")
    try:
        contexts, current = config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError):
        return "default"
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else "default"
