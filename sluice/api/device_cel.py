"""DRA device selectors: CEL expressions over one device, as a DeviceClass's or a claim
request's `selectors[].cel.expression` states them, evaluated the way kube-scheduler does.

The language is CEL itself, from the CEL project's own runtime (cel-expr-python, the C++
implementation): its parser, type checker and evaluator, with the extensions Kubernetes turns
on for these selectors (optional values `.?name.orValue(x)`, `cel.bind`, the string
functions). Kubernetes' quantity and semver libraries are added here as functions:
`quantity()`, `isQuantity()`, `semver()`, `isSemver()`, and on their values `compareTo`,
`isLessThan`, `isGreaterThan`, `sign`, `isInteger`, `asInteger`, `asApproximateFloat`,
`add`, `sub`, `major`, `minor`, `patch`.

The expression sees one variable, `device`, with:
- `driver`: the driver's name;
- `attributes[domain][name]`: the device's attributes grouped by domain, an unqualified name
  belonging to the driver's own domain (`type` of `gpu.nvidia.com` is
  `device.attributes["gpu.nvidia.com"].type`); a `version` attribute is a semver value;
- `capacity[domain][name]`: its capacities, as quantities;
- `allowMultipleAllocations`.
A domain the device lacks reads as an empty map (as in Kubernetes), for every domain the
expression names as a literal.

A selector that does not compile, or whose evaluation fails or gives anything but a bool,
gives a SelectorError: never a match. Kubernetes also aborts the allocation then.

Quantities and semantic versions travel through CEL as one-key maps (`{QUANTITY: milli}`,
`{SEMVER: text}`) holding their canonical form, so that `==` between two of them compares
their values, as Kubernetes' types do; quantities are exact to the milli-unit (sluice's
resource arithmetic), finer values rounded up.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

import cel_expr_python.cel as cel
import cel_expr_python.ext.ext_bindings as ext_bindings
import cel_expr_python.ext.ext_optional as ext_optional
import cel_expr_python.ext.ext_strings as ext_strings

from sluice.api.quantity import QuantityError, format_quantity, parse_quantity
from sluice.api.semver import Semver, SemverError, is_semver, parse_semver

QUANTITY: Final = "kubernetes.io/quantity"
SEMVER: Final = "kubernetes.io/semver"
MAX_EXPRESSION_LENGTH: Final = 10 * 1024
"""Kubernetes refuses longer selectors."""

Scalar = bool | int | str | Semver
AttributeValue = Scalar | tuple[Scalar, ...]

_DOMAIN_LITERAL: Final = re.compile(
    r"""device\s*\.\s*(?:attributes|capacity)\s*\[\s*(?:"([^"\\]*)"|'([^'\\]*)')\s*\]"""
)
_INT64: Final = (-(2**63), 2**63 - 1)


@dataclass(frozen=True, slots=True)
class SelectorError:
    """Why a selector gives no answer for a device (or for every device)."""

    expression: str
    reason: str

    def __str__(self) -> str:
        return f"selector {self.expression!r}: {self.reason}"


@dataclass(frozen=True, slots=True)
class CelDevice:
    """One device as a selector sees it. Attribute and capacity names are as the
    ResourceSlice writes them: qualified (`domain/name`) or not (the driver's domain)."""

    driver: str
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    capacity: Mapping[str, int] = field(default_factory=dict)
    """Milli-units."""
    allow_multiple_allocations: bool = False


class PreparedDevice:
    """A device turned into CEL's input once, for every selector evaluated against it."""

    __slots__ = ("_activations", "_attributes", "_capacity", "_driver", "_multiple")

    def __init__(self, device: CelDevice) -> None:
        self._driver = device.driver
        self._multiple = device.allow_multiple_allocations
        self._attributes = _grouped(
            device.driver, {k: _cel_value(v) for k, v in device.attributes.items()}
        )
        self._capacity = _grouped(
            device.driver, {k: _quantity_value(v) for k, v in device.capacity.items()}
        )
        # One activation per set of domains that selectors name (a memo: selectors are few).
        self._activations: dict[frozenset[str], cel.Activation] = {}

    def activation(self, domains: frozenset[str]) -> cel.Activation:
        """CEL's input, with an empty map for each of `domains` the device lacks."""
        found = self._activations.get(domains)
        if found is None:
            data = {
                "driver": self._driver,
                "attributes": {**{d: {} for d in domains}, **self._attributes},
                "capacity": {**{d: {} for d in domains}, **self._capacity},
                "allowMultipleAllocations": self._multiple,
            }
            found = _environment().Activation(data={"device": data})
            self._activations[domains] = found
        return found


class Selector:
    """A compiled selector: compile once, evaluate against many devices."""

    __slots__ = ("_domains", "_program", "expression")

    def __init__(self, expression: str, program: cel.Expression, domains: frozenset[str]) -> None:
        self.expression = expression
        self._program = program
        self._domains = domains

    def evaluate(self, device: PreparedDevice) -> bool | SelectorError:
        """True when the device satisfies the selector, False when not, else why not known."""
        result = self._program.eval(device.activation(self._domains))
        kind = result.type()
        if kind == cel.Type.BOOL:
            return bool(result.value())
        if kind == cel.Type.ERROR:
            return SelectorError(self.expression, str(result.value()))
        return SelectorError(self.expression, f"gives {kind.name().lower()}, not bool")


def compile_selector(expression: str) -> Selector | SelectorError:
    """The selector, or why it cannot be one (a syntax or type error, an unknown function)."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        return SelectorError(expression[:80], f"longer than {MAX_EXPRESSION_LENGTH} characters")
    try:
        program = _environment().compile(expression)
    except RuntimeError as error:
        return SelectorError(expression, _compile_message(str(error)))
    domains = frozenset(a or b for a, b in _DOMAIN_LITERAL.findall(expression))
    return Selector(expression, program, domains)


def matches(expression: str, device: CelDevice) -> bool | SelectorError:
    """One selector against one device (compiling it each time: for tests and one-offs)."""
    selector = compile_selector(expression)
    if isinstance(selector, SelectorError):
        return selector
    return selector.evaluate(PreparedDevice(device))


# -- the device as CEL's input -----------------------------------------------------------------


def _grouped(driver: str, values: Mapping[str, object]) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for qualified, value in values.items():
        domain, _, name = qualified.rpartition("/")
        out.setdefault(domain or driver, {})[name] = value
    return out


def _cel_value(value: AttributeValue) -> object:
    if isinstance(value, tuple):
        return [_cel_value(v) for v in value]
    if isinstance(value, Semver):
        return {SEMVER: str(value)}
    return value


def _quantity_value(milli: int) -> dict[str, str]:
    return {QUANTITY: str(milli)}


# -- Kubernetes' quantity and semver libraries ------------------------------------------------


def _milli(value: object) -> int:
    if isinstance(value, Mapping) and set(value) == {QUANTITY}:
        return int(value[QUANTITY])
    raise ValueError(f"{_shown(value)} is not a quantity")


def _version(value: object) -> Semver:
    if isinstance(value, Mapping) and set(value) == {SEMVER}:
        return parse_semver(str(value[SEMVER]))
    raise ValueError(f"{_shown(value)} is not a semver")


def _shown(value: object) -> str:
    if isinstance(value, Mapping) and len(value) == 1 and QUANTITY in value:
        return format_quantity(int(value[QUANTITY]))
    return repr(value)


def _quantity(text: str) -> dict[str, str]:
    try:
        return _quantity_value(parse_quantity(text))
    except QuantityError as error:
        raise ValueError(str(error)) from None


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def _semver(text: str, normalize: bool = False) -> dict[str, str]:
    try:
        return {SEMVER: str(parse_semver(text, normalize))}
    except SemverError as error:
        raise ValueError(str(error)) from None


def _compare(left: object, right: object) -> int:
    """compareTo of two quantities or two semvers (Kubernetes has one of each)."""
    if isinstance(left, Mapping) and QUANTITY in left:
        a, b = _milli(left), _milli(right)
        return (a > b) - (a < b)
    return _version(left).compare(_version(right))


def _as_integer(value: object) -> int:
    milli = _milli(value)
    whole, rest = divmod(milli, 1000)
    if rest or not _INT64[0] <= whole <= _INT64[1]:
        raise ValueError(f"{_shown(value)} is not an integer that fits in int64")
    return whole


def _plus(sign: int) -> Callable[[object, object], dict[str, str]]:
    def add(left: object, right: object) -> dict[str, str]:
        other = right * 1000 if isinstance(right, int) else _milli(right)
        return _quantity_value(_milli(left) + sign * other)

    return add


def _compile_message(text: str) -> str:
    """The checker's first line, without the status code the runtime appends."""
    first = text.strip().splitlines()[0] if text.strip() else text
    return re.sub(r"^[A-Z_]+: (ERROR: )?", "", first).strip()


@functools.cache
def _environment() -> cel.Env:
    """The selector environment: fixed, so built once per process."""
    m, s, i, b = cel.Type.MAP, cel.Type.STRING, cel.Type.INT, cel.Type.BOOL

    def member(
        name: str, result: cel.Type, other: cel.Type | None, impl: Callable[..., object]
    ) -> cel.Overload:
        params = [m] if other is None else [m, other]
        suffix = "" if other is None else f"_{other.name().lower()}"
        return cel.Overload(f"sluice_{name}{suffix}", result, params, is_member=True, impl=impl)

    def function(name: str, *overloads: cel.Overload) -> cel.FunctionDecl:
        return cel.FunctionDecl(name, list(overloads))

    def plain(
        name: str, result: cel.Type, params: list[cel.Type], impl: Callable[..., object]
    ) -> cel.Overload:
        suffix = "_".join(p.name().lower() for p in params)
        return cel.Overload(f"sluice_{name}_{suffix}", result, params, impl=impl)

    functions = [
        function("quantity", plain("quantity", m, [s], _quantity)),
        function("isQuantity", plain("isQuantity", b, [s], _is_quantity)),
        function(
            "semver",
            plain("semver", m, [s], _semver),
            plain("semver", m, [s, b], _semver),
        ),
        function(
            "isSemver",
            plain("isSemver", b, [s], is_semver),
            plain("isSemver", b, [s, b], is_semver),
        ),
        function("compareTo", member("compareTo", i, m, _compare)),
        function("isLessThan", member("isLessThan", b, m, lambda a, c: _compare(a, c) < 0)),
        function("isGreaterThan", member("isGreaterThan", b, m, lambda a, c: _compare(a, c) > 0)),
        function("sign", member("sign", i, None, lambda a: (_milli(a) > 0) - (_milli(a) < 0))),
        function("isInteger", member("isInteger", b, None, lambda a: _milli(a) % 1000 == 0)),
        function("asInteger", member("asInteger", i, None, _as_integer)),
        function(
            "asApproximateFloat",
            member("asApproximateFloat", cel.Type.DOUBLE, None, lambda a: _milli(a) / 1000),
        ),
        function("add", member("add", m, m, _plus(1)), member("add", m, i, _plus(1))),
        function("sub", member("sub", m, m, _plus(-1)), member("sub", m, i, _plus(-1))),
        function("major", member("major", i, None, lambda a: _version(a).major)),
        function("minor", member("minor", i, None, lambda a: _version(a).minor)),
        function("patch", member("patch", i, None, lambda a: _version(a).patch)),
    ]
    return cel.NewEnv(
        variables={"device": m},
        extensions=[
            ext_optional.ExtOptional(),
            ext_bindings.ExtBindings(),
            ext_strings.ExtStrings(),
        ],
        functions=functions,
    )
