"""The rule at the door for the labels sluice puts on a workload's pod templates
(docs/elastic.md, *What the tenancy guarantees become*): while the workload runs, each
template keeps the queue label and sluice.dev/resizable it had. The queue label sends its
pods to the pod webhooks and sluice.dev/resizable gates each new pod of a resizable
workload; a template without them makes pods that nothing holds, which for a kind whose
templates stay mutable (a PyTorchJob's) would run past what its queue admitted. A suspended
workload's may change: its pods are gone, and it is admitted again as it then is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.api.constants import QUEUE_LABEL, RESIZABLE_LABEL
from sluice.api.workloads import Adapter
from sluice.api.workloads.model import at
from sluice.queues.verdict import ALLOW, Verdict, deny

KEPT = (QUEUE_LABEL, RESIZABLE_LABEL)


def check_template_labels(
    old: Mapping[str, Any], new: Mapping[str, Any], who: str, staying: bool, adapter: Adapter
) -> Verdict:
    """``staying``: a tenant's write that leaves the workload admitted."""
    if not staying:
        return ALLOW
    for pod_set, path in adapter.pod_set_templates(old):
        had = _labels(at(old, path))
        now = _labels(at(new, path))
        for key in KEPT:
            if key in had and now.get(key) != had[key]:
                return deny(
                    "job-template-labels",
                    f"{who}: the pod template of {pod_set} keeps the label {key}={had[key]}"
                    " while it runs: it holds its pods at the door; suspend it"
                    f" ({adapter.hold.name}: true) to change it",
                )
    return ALLOW


def _labels(template: Any) -> Mapping[str, Any]:
    meta = template.get("metadata") if isinstance(template, Mapping) else None
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}
