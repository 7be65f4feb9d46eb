"""AdmissionReview admission.k8s.io/v1: reading a request, writing a response.

Everything here is pure so that malformed input can be tested without a server: a request
that cannot be understood raises ReviewError, which the server turns into a 400 with the
reason, never a 500.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonpatch

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})


class ReviewError(ValueError):
    """A body that is not a usable AdmissionReview; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class Request:
    uid: str
    kind: str  # the object's kind, e.g. Queue or Job
    group: str
    operation: str
    name: str
    namespace: str
    username: str
    obj: Mapping[str, Any] | None
    old: Mapping[str, Any] | None
    sub_resource: str = ""
    dry_run: bool = False
    user_groups: tuple[str, ...] = field(default_factory=tuple)
    options: Mapping[str, Any] | None = None
    """The operation's options (DeleteOptions on DELETE: propagationPolicy)."""
    resource: tuple[str, str] = ("", "")
    """The group and plural of the resource written (a subresource's parent: a workload's
    for its /scale, whose ``kind`` is Scale)."""


def parse_review(body: bytes) -> Request:
    try:
        review = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ReviewError(f"body is not JSON: {err}") from None
    if not isinstance(review, dict):
        raise ReviewError("body is not a JSON object")
    if review.get("apiVersion") != API_VERSION:
        raise ReviewError(f"apiVersion must be {API_VERSION}, got {review.get('apiVersion')!r}")
    if review.get("kind") != KIND:
        raise ReviewError(f"kind must be {KIND}, got {review.get('kind')!r}")
    request = review.get("request")
    if not isinstance(request, dict):
        raise ReviewError("request is missing")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("request.uid is missing")
    operation = request.get("operation")
    if not isinstance(operation, str) or operation not in OPERATIONS:
        raise ReviewError(f"request.operation {operation!r} is not one of {sorted(OPERATIONS)}")
    kind = request.get("kind")
    if not isinstance(kind, dict) or not isinstance(kind.get("kind"), str):
        raise ReviewError("request.kind is missing")
    obj = request.get("object")
    old = request.get("oldObject")
    for label, value in (("object", obj), ("oldObject", old)):
        if value is not None:
            _check_shape(f"request.{label}", value)
    raw_user = request.get("userInfo")
    user: dict[str, Any] = raw_user if isinstance(raw_user, dict) else {}
    raw_groups = user.get("groups")
    groups: list[Any] = raw_groups if isinstance(raw_groups, list) else []
    return Request(
        uid=uid,
        kind=kind["kind"],
        group=str(kind.get("group") or ""),
        operation=operation,
        name=str(request.get("name") or ""),
        namespace=str(request.get("namespace") or ""),
        username=str(user.get("username") or ""),
        obj=obj,
        old=old,
        sub_resource=str(request.get("subResource") or ""),
        dry_run=bool(request.get("dryRun")),
        user_groups=tuple(str(g) for g in groups),
        options=options if isinstance(options := request.get("options"), dict) else None,
        resource=_resource(request.get("resource")),
    )


def _resource(value: Any) -> tuple[str, str]:
    if not isinstance(value, dict):
        return ("", "")
    return (str(value.get("group") or ""), str(value.get("resource") or ""))


def _check_shape(where: str, obj: Any) -> None:
    """The envelope every Kubernetes object has; the API server never sends anything else, so
    a request that breaks it is refused whole rather than half-read by the rules."""
    if not isinstance(obj, dict):
        raise ReviewError(f"{where} is not an object")
    for key in ("metadata", "spec", "status"):
        if obj.get(key) is not None and not isinstance(obj[key], dict):
            raise ReviewError(f"{where}.{key} is not an object")
    meta = obj.get("metadata") or {}
    for key in ("name", "namespace", "generateName"):
        if meta.get(key) is not None and not isinstance(meta[key], str):
            raise ReviewError(f"{where}.metadata.{key} is not a string")
    for key in ("labels", "annotations"):
        values = meta.get(key)
        if values is None:
            continue
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            raise ReviewError(f"{where}.metadata.{key} is not a map of strings")


def respond(
    uid: str,
    *,
    allowed: bool = True,
    message: str = "",
    reason: str = "",
    original: Mapping[str, Any] | None = None,
    patched: Mapping[str, Any] | None = None,
    warnings: tuple[str, ...] = (),
    patch: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The AdmissionReview response; a JSONPatch when ``patched`` differs from ``original``,
    or the operations of ``patch`` as given."""
    response: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if not allowed:
        response["status"] = {"code": 403, "message": message, "reason": reason or "Forbidden"}
    if allowed and patch is None and original is not None and patched is not None:
        patch = jsonpatch.make_patch(dict(original), dict(patched)).patch
    if allowed and patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    if warnings:
        response["warnings"] = list(warnings)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}
