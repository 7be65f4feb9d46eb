"""A Kubernetes object as its JSON decodes: the one name every module gives it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Obj = Mapping[str, Any]
"""An object as the API server sends it (a watch event's, a listing's, a write's answer),
read but never changed through this type."""
