"""``sluice queue``: create, inspect, open, close and delete queues, kubectl-style."""

from __future__ import annotations

import enum
import json
from typing import Annotated, Any

import typer
import yaml

from sluice.api.constants import API_VERSION, GROUP, KIND, PLURAL, ROOT_QUEUE, VERSION
from sluice.cli.common import Kubeconfig, KubeContext, fail, group, table_console
from sluice.cli.queue_view import FlagError, queue_table, queue_tree, spec_from_flags, subtree


class Output(enum.StrEnum):
    table = "table"
    yaml = "yaml"
    json = "json"


OutputOpt = Annotated[Output, typer.Option("--output", "-o", help="table, yaml or json.")]
Weight = Annotated[
    int | None, typer.Option(min=1, max=65535, help="Share of the parent's deserved (1..65535).")
]
Capability = Annotated[str | None, typer.Option(help="Hard cap, e.g. cpu=4,memory=8Gi.")]
Deserved = Annotated[str | None, typer.Option(help="The reclaim line, e.g. cpu=4.")]
Guarantee = Annotated[str | None, typer.Option(help="Never lent or reclaimed, e.g. cpu=2.")]
Priority = Annotated[int | None, typer.Option(min=0, help="Queue priority (>= 0).")]
PriorityClass = Annotated[str | None, typer.Option(help="PriorityClass giving the priority.")]
Parent = Annotated[str | None, typer.Option(help="Parent queue (default root).")]
Reclaimable = Annotated[
    bool | None,
    typer.Option("--reclaimable/--no-reclaimable", help="May other queues reclaim from it."),
]


class DequeueStrategy(enum.StrEnum):
    fifo = "fifo"
    traverse = "traverse"


Dequeue = Annotated[
    DequeueStrategy | None,
    typer.Option(help="fifo stops at the first job that does not fit; traverse skips it."),
]
Recursive = Annotated[bool, typer.Option("--recursive", "-r", help="The whole subtree.")]


def _api_message(err: BaseException) -> str:
    """The API server's (or the webhook's) own message, shown as is."""
    from sluice.kube.errors import Failure, classify, message

    if isinstance(err, OSError):
        return f"cannot reach the API server: {err}"
    said = message(err)
    if classify(err) is Failure.GONE:
        return said.replace(f'{PLURAL}.{GROUP} "', "queue ").replace('" not found', " not found")
    return said


class Client:
    def __init__(self, kubeconfig: str | None, context: str | None = None) -> None:
        from kubernetes import client

        from sluice.kube import KubeConfigError, api_client

        try:
            self.api = client.CustomObjectsApi(api_client(kubeconfig, context))
        except KubeConfigError as err:
            fail(str(err))

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        from sluice.kube.errors import API_ERRORS

        try:
            return getattr(self.api, method)(GROUP, VERSION, PLURAL, *args, **kwargs)
        except API_ERRORS as err:
            fail(_api_message(err))

    def get(self, name: str) -> dict[str, Any]:
        return dict(self.call("get_cluster_custom_object", name))

    def list(self) -> list[dict[str, Any]]:
        return list(self.call("list_cluster_custom_object").get("items", []))

    def patch(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        merge = "application/merge-patch+json"
        return dict(self.call("patch_cluster_custom_object", name, body, _content_type=merge))


def show(items: list[dict[str, Any]], output: Output, many: bool = False) -> None:
    document: Any = {"items": items} if many else items[0]
    if output is Output.json:
        typer.echo(json.dumps(document, indent=2))
    elif output is Output.yaml:
        typer.echo(yaml.safe_dump(document, sort_keys=False))
    else:
        table_console().print(queue_table(items))


SPEC_FLAGS = (
    "weight",
    "capability",
    "deserved",
    "guarantee",
    "priority",
    "priority_class_name",
    "parent",
    "reclaimable",
    "dequeue_strategy",
)


def _spec(arguments: dict[str, Any]) -> dict[str, Any]:
    """The spec fields among a command's arguments (the flags the user gave)."""
    try:
        return spec_from_flags(**{k: arguments[k] for k in SPEC_FLAGS})
    except FlagError as err:
        fail(str(err))


def create(
    name: str,
    weight: Weight = None,
    capability: Capability = None,
    deserved: Deserved = None,
    guarantee: Guarantee = None,
    priority: Priority = None,
    priority_class_name: PriorityClass = None,
    parent: Parent = None,
    reclaimable: Reclaimable = None,
    dequeue_strategy: Dequeue = None,
    kubeconfig: Kubeconfig = None,
    context: KubeContext = None,
    output: OutputOpt = Output.table,
) -> None:
    """Create a queue."""
    spec = _spec(locals())
    body = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": spec}
    show([dict(Client(kubeconfig, context).call("create_cluster_custom_object", body))], output)


def update(
    name: str,
    weight: Weight = None,
    capability: Capability = None,
    deserved: Deserved = None,
    guarantee: Guarantee = None,
    priority: Priority = None,
    priority_class_name: PriorityClass = None,
    parent: Parent = None,
    reclaimable: Reclaimable = None,
    dequeue_strategy: Dequeue = None,
    kubeconfig: Kubeconfig = None,
    context: KubeContext = None,
    output: OutputOpt = Output.table,
) -> None:
    """Change the given fields of a queue (resource maps are updated per resource)."""
    spec = _spec(locals())
    if not spec:
        fail("nothing to update: give at least one field flag (see --help)")
    show([Client(kubeconfig, context).patch(name, {"spec": spec})], output)


def get(
    name: str,
    kubeconfig: Kubeconfig = None,
    context: KubeContext = None,
    output: OutputOpt = Output.table,
) -> None:
    """Show one queue."""
    show([Client(kubeconfig, context).get(name)], output)


def list_queues(
    kubeconfig: Kubeconfig = None, context: KubeContext = None, output: OutputOpt = Output.table
) -> None:
    """List every queue."""
    show(Client(kubeconfig, context).list(), output, many=True)


def _set_state(
    name: str, state: str, recursive: bool, kubeconfig: str | None, context: str | None
) -> None:
    client = Client(kubeconfig, context)
    client.get(name)  # a clear "not found" before anything else
    names = subtree(client.list(), name) if recursive else [name]
    # Open parents first (a child cannot be Open under a Closed parent); close leaves first.
    for queue in names if state == "Open" else list(reversed(names)):
        client.patch(queue, {"spec": {"state": state}})
        typer.echo(f"queue {queue}: spec.state {state}")


def open_queue(
    name: str,
    recursive: Recursive = False,
    kubeconfig: Kubeconfig = None,
    context: KubeContext = None,
) -> None:
    """Open a queue (with --recursive, its whole subtree, parents first)."""
    _set_state(name, "Open", recursive, kubeconfig, context)


def close_queue(
    name: str,
    recursive: Recursive = False,
    kubeconfig: Kubeconfig = None,
    context: KubeContext = None,
) -> None:
    """Close a queue: Closing while its jobs finish, then Closed; its subtree closes too."""
    _set_state(name, "Closed", recursive, kubeconfig, context)


def delete(
    name: str,
    recursive: Recursive = False,
    kubeconfig: Kubeconfig = None,
    context: KubeContext = None,
) -> None:
    """Delete a Closed queue; the operator deletes its (Closed) subtree first."""
    client = Client(kubeconfig, context)
    items = client.list()
    state = {o["metadata"]["name"]: (o.get("status") or {}).get("state") for o in items}
    if name not in state:
        fail(f"queue {name} not found")
    names = subtree(items, name) if recursive else [name]
    not_closed = [q for q in names if state.get(q) != "Closed"]
    if not_closed:
        again = " --recursive" if recursive else ""
        fail(
            f"queue {not_closed[0]} is {state.get(not_closed[0]) or 'not reconciled yet'};"
            f" only a Closed queue can be deleted (sluice queue close {name}{again},"
            " then wait for its jobs to finish)"
        )
    client.call("delete_cluster_custom_object", name)
    typer.echo(f"queue {name} deleted")


def tree(
    name: Annotated[str, typer.Argument(help="Top of the tree to draw.")] = ROOT_QUEUE,
    kubeconfig: Kubeconfig = None,
    context: KubeContext = None,
) -> None:
    """Draw the queue hierarchy with state, weight, deserved, allocated and share."""
    items = Client(kubeconfig, context).list()
    if name not in {o["metadata"]["name"] for o in items}:
        fail(f"queue {name} not found")
    table_console().print(queue_tree(items, name))


def register(app: typer.Typer) -> None:
    queues = group(app, "queue", "Create, inspect, open, close and delete queues.")
    queues.command("create")(create)
    queues.command("get")(get)
    queues.command("list")(list_queues)
    queues.command("update")(update)
    queues.command("open")(open_queue)
    queues.command("close")(close_queue)
    queues.command("delete")(delete)
    queues.command("tree")(tree)
