"""Kubernetes resource quantities as exact integers of milli-units.

Kubernetes' own parser lives in the Go API machinery; the Python client only offers a Decimal
parser without canonical formatting and would pull an I/O library into the pure core, so the
(small, fixed) grammar is implemented here: sign, digits with an optional fraction, then a
binary suffix (Ki..Ei), a decimal suffix (n, u, m, k, M..E) or a decimal exponent (e3, E-2).
Like Kubernetes, a value finer than a milli-unit is rounded up.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Final

from sluice.api.memo import Memo

_BINARY: Final = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}

_QUANTITY_RE: Final = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$"
)

QUANTITY_PATTERN: Final = (
    r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[numkMGTPE])?$"
)
"""The same grammar as a JSON-schema pattern, for the CRD."""

BYTE_RESOURCES: Final = frozenset({"memory", "ephemeral-storage", "storage"})


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> int:
    """The quantity in milli-units: ``"1.5"`` -> 1500, ``"500m"`` -> 500, ``"1Ki"`` -> 1024000."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return value * 1000
    if isinstance(value, float):
        if not math.isfinite(value):  # JSON readers accept Infinity and NaN
            raise QuantityError(f"{value!r} is not a quantity")
        return _ceil(Fraction(value) * 1000)
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity")
    return _PARSED.lookup(value)


def _parse_text(value: str) -> int:
    text = value.strip()
    match = _QUANTITY_RE.match(text)
    if match is None or len(text) > 64:
        raise QuantityError(
            f"{value!r} is not a quantity (expected e.g. 500m, 2, 1.5, 8Gi, 100M, 1e3)"
        )
    number = Fraction(match["num"])
    if match["bin"]:
        number *= 1024 ** _BINARY[match["bin"]]
    elif match["exp"]:
        exponent = int(match["exp"][1:])
        if abs(exponent) > 30:
            raise QuantityError(f"{value!r}: exponent out of range")
        number *= Fraction(10) ** exponent
    else:
        number *= Fraction(10) ** _DECIMAL[match["dec"] or ""]
    milli = _ceil(number * 1000)
    return -milli if match["sign"] == "-" else milli


_PARSED: Final = Memo(_parse_text, 4096)
"""A cluster repeats a handful of quantity strings over thousands of objects, and exact
fractions are slow: each distinct string is worked out once (an error is not remembered)."""


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def format_quantity(milli: int, resource: str | None = None) -> str:
    """Write milli-units back in the shortest exact form, in a unit family people use.

    A fraction is written in milli-units, as Kubernetes writes it (``1500m``). A whole amount
    takes the largest decimal suffix that is exact (``4G``, ``2k``, ``64``); for a byte-valued
    resource such as memory the largest exact binary suffix (``16Gi``) competes with it and the
    shorter text wins, binary on a tie. So an amount comes back in the family it was written
    in: ``4G`` of memory is not turned into ``3906250Ki``, nor ``16Gi`` into ``17179869184``.
    """
    if milli < 0:
        return "-" + format_quantity(-milli, resource)
    if milli % 1000:
        return f"{milli}m"
    whole = milli // 1000
    if whole == 0:
        return "0"
    decimal = str(whole)
    for suffix in ("E", "P", "T", "G", "M", "k"):
        unit = 10 ** _DECIMAL[suffix]
        if whole % unit == 0:
            decimal = f"{whole // unit}{suffix}"
            break
    if resource is None or not _is_bytes(resource):
        return decimal
    for suffix, power in sorted(_BINARY.items(), key=lambda item: -item[1]):
        unit = 1024**power
        if whole % unit == 0:
            binary = f"{whole // unit}{suffix}"
            return binary if len(binary) <= len(decimal) else decimal
    return decimal


def _is_bytes(resource: str) -> bool:
    return resource in BYTE_RESOURCES or resource.startswith("hugepages-")
