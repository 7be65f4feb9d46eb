"""Semantic versions read and ordered as Semantic Versioning 2.0.0 (and Kubernetes' CEL
semver library) define them."""

from __future__ import annotations

import pytest

from sluice.api.semver import Semver, SemverError, is_semver, parse_semver


def test_precedence_follows_the_specification() -> None:
    # The example list of Semantic Versioning 2.0.0, section 11, in ascending order.
    ordered = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "1.0.1",
        "1.1.0",
        "1.10.0",
        "2.0.0",
    ]
    versions = [parse_semver(v) for v in ordered]
    for i, low in enumerate(versions):
        assert low.compare(low) == 0
        for high in versions[i + 1 :]:
            assert low.compare(high) == -1, (low, high)
            assert high.compare(low) == 1, (high, low)


def test_build_metadata_does_not_count() -> None:
    assert parse_semver("1.2.3+abc.5") == parse_semver("1.2.3") == Semver(1, 2, 3)
    assert str(parse_semver("1.2.3-rc.1+build")) == "1.2.3-rc.1"


@pytest.mark.parametrize("text", ["1.2", "v1.2.3", "01.2.3", "1.2.3-", "1.2.3-01", "", "a.b.c"])
def test_strict_parsing_refuses_what_is_not_semver(text: str) -> None:
    assert not is_semver(text)
    with pytest.raises(SemverError, match="is not a semantic version"):
        parse_semver(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("v1.2.3", "1.2.3"), ("1.2", "1.2.0"), ("v2", "2.0.0"), ("01.002.3-rc.1", "1.2.3-rc.1")],
)
def test_normalising_parsing_fills_in_and_trims(text: str, expected: str) -> None:
    assert is_semver(text, normalize=True)
    assert str(parse_semver(text, normalize=True)) == expected
