"""The record of a workload admitted smaller than it asked (sluice.dev/admitted-size,
docs/elastic.md, *Admitted smaller*): written the same way each time, read back exactly, and
read as none when it is not one sluice writes."""

from __future__ import annotations

import pytest

from sluice.api.admitted_size import SizeRecord, size_record_text, size_records_of
from sluice.api.constants import ADMITTED_SIZE_ANNOTATION

INDEXED = SizeRecord("main", 8, 6, (("spec.completions", 8), ("spec.parallelism", 8)))
RAY = SizeRecord("wide", 6, 4, (("spec.rayClusterSpec.workerGroupSpecs[0].replicas", 3),))


def test_the_record_is_compact_json_with_sorted_keys() -> None:
    assert size_record_text([INDEXED]) == (
        '{"main":{"admitted":6,"asked":8,"fields":{"spec.completions":8,"spec.parallelism":8}}}'
    )


def test_the_record_reads_back_as_written_by_pod_set() -> None:
    text = size_record_text([RAY, INDEXED])
    assert size_records_of({ADMITTED_SIZE_ANNOTATION: text}) == (INDEXED, RAY)


def test_no_record_reads_as_none() -> None:
    assert size_records_of({}) == ()


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"main": 6}',
        '{"main": {"asked": 8, "admitted": "6", "fields": {}}}',
        '{"main": {"asked": 8, "admitted": 6, "fields": {"spec.parallelism": "8"}}}',
        '{"main": {"asked": 8, "admitted": 6, "fields": []}}',
        '{"main": {"asked": 8, "admitted": true, "fields": {}}}',
        '{"main": {"asked": 6, "admitted": 8, "fields": {}}}',
    ],
)
def test_a_record_sluice_does_not_write_reads_as_none(text: str) -> None:
    # Nothing is then put back: a size sluice did not lower is not sluice's to restore.
    assert size_records_of({ADMITTED_SIZE_ANNOTATION: text}) == ()
