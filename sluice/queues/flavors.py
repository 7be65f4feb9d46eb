"""Flavors at the door (docs/scheduler.md, *Flavors*)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.api.constants import FLAVOR_KIND
from sluice.api.flavor import flavor_problems
from sluice.queues.verdict import ALLOW, Verdict, deny


def check_flavor(obj: Mapping[str, Any]) -> Verdict:
    """A Flavor at the door: valid label keys and values, taints of a known effect each named
    once, a Topology's name that can be one."""
    problems = flavor_problems(obj.get("spec"))
    if not problems:
        return ALLOW
    name = (obj.get("metadata") or {}).get("name") or "?"
    return deny("flavor-invalid", f"{FLAVOR_KIND.lower()} {name}: " + "; ".join(problems))
