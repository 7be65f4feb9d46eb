"""Reading the YAML fixtures beside these tests, and applying a JSON merge patch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent


def objects(file_name: str) -> dict[str, dict[str, Any]]:
    """The fixture file's objects by metadata.name."""
    docs = yaml.safe_load_all((HERE / file_name).read_text())
    return {doc["metadata"]["name"]: doc for doc in docs if doc}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: what the API server makes of ``target`` given a JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out
