"""The one reading of a failed API call: every caller classifies through ``classify`` and
decides what each class means for it (the executor, the custom objects' writer, the Lease,
the watches, the command line)."""

from __future__ import annotations

import json
from enum import Enum

from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError


class Unsent(Exception):
    """A write its client kept back (``sluice.kube.writer``): nothing was sent."""


API_ERRORS = (ApiException, HTTPError, OSError, Unsent)
"""What a call through the kubernetes client raises when it fails."""


class Failure(Enum):
    CONFLICT = "conflict"
    """409: the object changed since it was read, or it already exists."""
    GONE = "gone"
    """404: the object (or the resource) does not exist."""
    EXPIRED = "expired"
    """410: a resourceVersion too old to watch from; list again."""
    RETRY = "retry"
    """429: the API server did nothing and asks to come back later."""
    FORBIDDEN = "forbidden"
    """401, 403: this identity may not do it."""
    REFUSED = "refused"
    """Any other 4xx: the request itself was refused (invalid, denied by a webhook)."""
    UNSURE = "unsure"
    """A server error, a timeout, a dropped connection: whether it happened is unknown."""
    UNSENT = "unsent"
    """The writer's own client kept the request back (the writer may not write now): nothing
    was sent, nothing happened."""


_BY_STATUS = {
    409: Failure.CONFLICT,
    404: Failure.GONE,
    410: Failure.EXPIRED,
    429: Failure.RETRY,
    401: Failure.FORBIDDEN,
    403: Failure.FORBIDDEN,
}


def classify(err: BaseException) -> Failure:
    """The class of an API call's failure."""
    if isinstance(err, Unsent):
        return Failure.UNSENT
    if isinstance(err, ApiException):
        status = err.status or 0
        if status == 0 or status >= 500:
            return Failure.UNSURE
        return _BY_STATUS.get(status, Failure.REFUSED)
    return Failure.UNSURE  # a connection that broke, a timeout: the outcome is unknown


def message(err: BaseException) -> str:
    """What the API server said (its Status message), for a log line or a person."""
    if isinstance(err, ApiException):
        try:
            return str(json.loads(err.body or "").get("message") or err.reason)
        except (TypeError, ValueError, AttributeError):
            return str(err.reason)
    return repr(err)
