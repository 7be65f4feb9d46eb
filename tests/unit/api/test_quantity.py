"""Kubernetes quantities: every form the API server accepts, exact milli-units, canonical output."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.api.quantity import QuantityError, format_quantity, parse_quantity
from sluice.api.resources import Resources


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("100m", 100),
        ("0.5", 500),
        ("1", 1000),
        ("+2", 2000),
        ("-2", -2000),
        ("1e3", 1_000_000),
        ("1E-3", 1),
        ("2Ki", 2 * 1024 * 1000),
        ("1Mi", 1024**2 * 1000),
        ("1Gi", 1024**3 * 1000),
        ("1Ti", 1024**4 * 1000),
        ("1Pi", 1024**5 * 1000),
        ("1Ei", 1024**6 * 1000),
        ("1k", 1_000_000),
        ("1M", 10**9),
        ("1G", 10**12),
        ("1T", 10**15),
        ("1P", 10**18),
        ("1E", 10**21),
        ("1500000n", 2),  # 1.5m rounds up to 2m, as Kubernetes does
        ("1u", 1),
        ("1n", 1),
        (".5", 500),
        ("1.", 1000),
        ("0.0001", 1),
    ],
)
def test_parses_every_kubernetes_form(text: str, milli: int) -> None:
    assert parse_quantity(text) == milli


def test_numbers_as_yaml_gives_them() -> None:
    assert parse_quantity(4) == 4000
    assert parse_quantity(0.25) == 250


@pytest.mark.parametrize(
    "text", ["", "abc", "4x", "1.2.3", "1 Gi", "Gi", "1KiB", "1ki", "--1", "1e", "0x10", "1e99"]
)
def test_refuses_malformed(text: str) -> None:
    with pytest.raises(QuantityError, match=r"quantity|exponent"):
        parse_quantity(text)


def test_a_remembered_string_answers_the_same_and_a_bad_one_is_refused_every_time() -> None:
    assert [parse_quantity("1536Mi") for _ in range(3)] == [1536 * 1024**2 * 1000] * 3
    for _ in range(2):
        with pytest.raises(QuantityError, match="'8 Gi' is not a quantity"):
            parse_quantity("8 Gi")


def test_resources_get_is_a_plain_mapping_lookup() -> None:
    vector = Resources.parse({"cpu": "2", "memory": "0"})
    assert vector.get("cpu") == 2000 and vector.get("cpu", 7) == 2000
    assert vector.get("memory") is None and vector.get("gpu", 0) == 0


def test_refuses_booleans() -> None:
    with pytest.raises(QuantityError):
        parse_quantity(True)


@pytest.mark.parametrize(
    ("milli", "resource", "text"),
    [
        (500, "cpu", "500m"),
        (4000, "cpu", "4"),
        (0, "cpu", "0"),
        (2_000_000, "cpu", "2k"),
        (1024**3 * 8000, "memory", "8Gi"),
        (1024**2 * 1536 * 1000, "memory", "1536Mi"),
        (1024**2 * 1000, "hugepages-2Mi", "1Mi"),
        (8000, "nvidia.com/gpu", "8"),
        (-1500, "cpu", "-1500m"),
        (1500, "cpu", "1500m"),
        (4 * 10**9 * 1000, "memory", "4G"),
        (3 * 10**9 * 1000, "memory", "3G"),
        (16 * 1024**3 * 1000, "memory", "16Gi"),
        (2_048_000 * 1000, "memory", "2048k"),
        (1000 * 1024**2 * 1000, "memory", "1000Mi"),
        (1024 * 1000, "cpu", "1024"),
        (1000 * 1000, "ephemeral-storage", "1k"),
    ],
)
def test_formats_in_the_shortest_exact_form_of_a_family_people_write(
    milli: int, resource: str, text: str
) -> None:
    assert format_quantity(milli, resource) == text


@pytest.mark.parametrize(
    "text", ["4G", "16Gi", "1500m", "500M", "1536Mi", "2k", "64", "100Ki", "3Ti", "250m"]
)
def test_an_amount_comes_back_as_it_was_written(text: str) -> None:
    assert format_quantity(parse_quantity(text), "memory") == text


@given(st.integers(min_value=-(10**15), max_value=10**15), st.sampled_from(["cpu", "memory"]))
def test_format_parse_round_trip(milli: int, resource: str) -> None:
    assert parse_quantity(format_quantity(milli, resource)) == milli


@given(
    st.integers(min_value=0, max_value=10**6),
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "n", "u"]),
)
def test_parse_is_monotonic_in_the_number(number: int, suffix: str) -> None:
    assert parse_quantity(f"{number}{suffix}") <= parse_quantity(f"{number + 1}{suffix}")


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_a_number_json_may_carry_but_no_quantity_is_refused(value: float) -> None:
    with pytest.raises(QuantityError, match="is not a quantity"):
        parse_quantity(value)
