"""The one classifier of API failures: each class, from what the client raises."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import ProtocolError, ReadTimeoutError

from sluice.kube.errors import Failure, Unsent, classify, message


def refusal(status: int, text: str) -> ApiException:
    err = ApiException(status=status, reason="Reason")
    err.body = json.dumps({"kind": "Status", "code": status, "message": text})
    return err


CASES = [
    (refusal(409, "the object has been modified"), Failure.CONFLICT),
    (refusal(409, 'queues "root" already exists'), Failure.CONFLICT),
    (refusal(404, 'jobs.batch "j" not found'), Failure.GONE),
    (refusal(410, "too old resource version: 1 (4012)"), Failure.EXPIRED),
    (refusal(429, "too many requests"), Failure.RETRY),
    (refusal(401, "Unauthorized"), Failure.FORBIDDEN),
    (refusal(403, 'cannot patch resource "jobs"'), Failure.FORBIDDEN),
    (refusal(400, "bad request"), Failure.REFUSED),
    (refusal(422, "spec.weight: Invalid value"), Failure.REFUSED),
    (refusal(500, "etcdserver: request timed out"), Failure.UNSURE),
    (refusal(504, "Timeout: request did not complete"), Failure.UNSURE),
    (ApiException(status=0, reason="no answer"), Failure.UNSURE),
    (ProtocolError("Connection aborted."), Failure.UNSURE),
    (ReadTimeoutError(None, "/apis", "Read timed out."), Failure.UNSURE),  # type: ignore[arg-type]
    (ConnectionRefusedError(111, "Connection refused"), Failure.UNSURE),
    (Unsent("PATCH /apis/batch/v1/namespaces/ns/jobs/j: may not write now"), Failure.UNSENT),
]


@pytest.mark.parametrize(("error", "failure"), CASES)
def test_each_failure_has_one_class(error: BaseException, failure: Failure) -> None:
    assert classify(error) is failure


def test_every_class_is_met() -> None:
    assert {failure for _, failure in CASES} == set(Failure)


def test_the_message_is_the_api_servers_own() -> None:
    assert message(refusal(403, 'cannot patch resource "jobs"')) == 'cannot patch resource "jobs"'
    assert message(ApiException(status=500, reason="Internal")) == "Internal"  # no body
    assert message(ProtocolError("Connection aborted.")) == "ProtocolError('Connection aborted.')"
