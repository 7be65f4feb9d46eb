"""Defaults a Queue gets at the door (the mutating webhook diffs the result into a JSONPatch).

The CRD schema defaults weight, reclaimable, state and dequeueStrategy too; the webhook fills
them as well so that a cluster whose CRD predates a default still stores complete objects.
``parent`` is only defaulted here: the root queue must have none.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from sluice.api.constants import ROOT_QUEUE

SPEC_DEFAULTS: Final[Mapping[str, Any]] = {
    "weight": 1,
    "reclaimable": True,
    "state": "Open",
    "dequeueStrategy": "traverse",
}


def queue_with_defaults(obj: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = copy.deepcopy(dict(obj))
    spec = out.get("spec")
    if not isinstance(spec, dict):
        spec = {}
        out["spec"] = spec
    for key, value in SPEC_DEFAULTS.items():
        if spec.get(key) is None:
            spec[key] = value
    name = (out.get("metadata") or {}).get("name")
    if name != ROOT_QUEUE and not spec.get("parent"):
        spec["parent"] = ROOT_QUEUE
    return out
