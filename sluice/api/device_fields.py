"""The fields of the Dynamic Resource Allocation objects, read and checked one at a time: each
reader names the object and the field that does not read (``InvalidObject``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.api.errors import InvalidObject
from sluice.api.quantity import QuantityError, parse_quantity


def read_selectors(raw: Any, kind: str, name: str, where: str) -> tuple[str, ...]:
    out: list[str] = []
    for i, selector in enumerate(raw or ()):
        cel = mapping_at(
            mapping_at(selector, kind, name, f"{where}[{i}]").get("cel"),
            kind,
            name,
            f"{where}[{i}].cel",
        )
        out.append(string_at(cel.get("expression"), kind, name, f"{where}[{i}].cel.expression"))
    return tuple(out)


def object_name(obj: Mapping[str, Any], kind: str) -> str:
    name = (obj.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise InvalidObject(kind, "?", "metadata.name", "missing")
    return name


def mapping_at(raw: Any, kind: str, name: str, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise InvalidObject(kind, name, where, "expected an object")
    return raw


def string_at(raw: Any, kind: str, name: str, where: str) -> str:
    if not isinstance(raw, str) or not raw:
        raise InvalidObject(kind, name, where, "expected a non-empty string")
    return raw


def count_at(raw: Any, kind: str, name: str, where: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise InvalidObject(kind, name, where, f"{raw!r} is not a non-negative integer")
    return raw


def quantity_at(raw: Any, kind: str, name: str, where: str) -> int:
    try:
        return parse_quantity(raw)
    except QuantityError as error:
        raise InvalidObject(kind, name, where, str(error)) from None
