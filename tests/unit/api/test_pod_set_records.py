"""The reader of the records sluice keeps per pod set on a workload: read whole, in pod set
order, or not at all."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.api.pod_set_records import pod_set_records

KEY = "sluice.dev/record"


def _count(pod_set: str, value: Any) -> tuple[str, int] | None:
    return (pod_set, value) if isinstance(value, int) else None


def test_entries_read_in_pod_set_order() -> None:
    record = {KEY: '{"workers": 4, "driver": 1}'}
    assert pod_set_records(record, KEY, _count) == (("driver", 1), ("workers", 4))


def test_one_entry_sluice_does_not_write_voids_the_whole_record() -> None:
    # Undoing half of what was done would leave the workload in neither state.
    assert pod_set_records({KEY: '{"driver": 1, "workers": "4"}'}, KEY, _count) == ()


@pytest.mark.parametrize("value", [None, 7, "not json", "[1]", '"text"'])
def test_a_record_that_is_not_a_json_object_reads_as_none(value: Any) -> None:
    annotations = {} if value is None else {KEY: value}
    assert pod_set_records(annotations, KEY, _count) == ()
