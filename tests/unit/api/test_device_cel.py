"""DRA device selectors evaluated as kube-scheduler evaluates them: real selector shapes of
published DRA drivers, Kubernetes' quantity and semver functions, and every way a selector can
fail, which is never a match."""

from __future__ import annotations

import pytest

from sluice.api.device_cel import (
    MAX_EXPRESSION_LENGTH,
    CelDevice,
    PreparedDevice,
    Selector,
    SelectorError,
    compile_selector,
    matches,
)
from sluice.api.quantity import parse_quantity
from sluice.api.semver import parse_semver

NVIDIA = "gpu.nvidia.com"

A100 = CelDevice(
    driver=NVIDIA,
    attributes={
        "type": "gpu",
        "index": 0,
        "productName": "NVIDIA A100-SXM4-80GB",
        "architecture": "Ampere",
        "driverVersion": parse_semver("550.54.15"),
        "cudaComputeCapability": parse_semver("8.0.0"),
        "resource.kubernetes.io/pcieRoot": "pci0000:00",
    },
    capacity={"memory": parse_quantity("80Gi")},
)
MIG = CelDevice(
    driver=NVIDIA,
    attributes={"type": "mig", "profile": "1g.10gb", "parentIndex": 0},
    capacity={"memory": parse_quantity("10Gi"), "multiprocessors": parse_quantity("14")},
)
EXAMPLE = CelDevice(
    driver="gpu.example.com",
    attributes={"model": "LATEST-GPU-MODEL", "index": 3, "driverVersion": parse_semver("1.0.0")},
    capacity={"memory": parse_quantity("80Gi")},
    allow_multiple_allocations=True,
)

GPU_CLASS = f"device.driver == '{NVIDIA}' && device.attributes['{NVIDIA}'].type == 'gpu'"
MIG_CLASS = f"device.driver == '{NVIDIA}' && device.attributes['{NVIDIA}'].type == 'mig'"


@pytest.mark.parametrize(
    ("expression", "device", "expected"),
    [
        (GPU_CLASS, A100, True),
        (GPU_CLASS, MIG, False),
        (MIG_CLASS, MIG, True),
        (MIG_CLASS, A100, False),
        # A class of one driver against another driver's device: && stops at the driver.
        (GPU_CLASS, EXAMPLE, False),
        ("device.driver == 'gpu.example.com'", EXAMPLE, True),
        (f"device.attributes['{NVIDIA}'].productName == 'NVIDIA A100-SXM4-80GB'", A100, True),
        (f"device.attributes['{NVIDIA}'].productName.startsWith('NVIDIA A100')", A100, True),
        (f"device.attributes['{NVIDIA}'].architecture.lowerAscii() == 'ampere'", A100, True),
        (f"device.attributes['{NVIDIA}'].profile in ['1g.10gb', '2g.20gb']", MIG, True),
        # A qualified attribute lives under its own domain, not the driver's.
        ("device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:00'", A100, True),
        (f"has(device.attributes['{NVIDIA}'].pcieRoot)", A100, False),
        # Capacities are quantities.
        (f"device.capacity['{NVIDIA}'].memory.compareTo(quantity('40Gi')) >= 0", A100, True),
        (f"device.capacity['{NVIDIA}'].memory.compareTo(quantity('40Gi')) >= 0", MIG, False),
        (f"device.capacity['{NVIDIA}'].memory.isGreaterThan(quantity('79Gi'))", A100, True),
        (f"device.capacity['{NVIDIA}'].memory.isLessThan(quantity('79Gi'))", A100, False),
        (f"device.capacity['{NVIDIA}'].memory == quantity('80Gi')", A100, True),
        (f"device.capacity['{NVIDIA}'].memory == quantity('81920Mi')", A100, True),
        (f"device.capacity['{NVIDIA}'].multiprocessors.asInteger() == 14", MIG, True),
        # Version attributes are semvers.
        (
            f"device.attributes['{NVIDIA}'].driverVersion.isGreaterThan(semver('550.0.0'))",
            A100,
            True,
        ),
        (
            f"device.attributes['{NVIDIA}'].driverVersion.compareTo(semver('560.1.0')) < 0",
            A100,
            True,
        ),
        (f"device.attributes['{NVIDIA}'].cudaComputeCapability.major() >= 8", A100, True),
        (f"device.attributes['{NVIDIA}'].driverVersion == semver('550.54.15')", A100, True),
        # Optional values, cel.bind, has(): how robust selectors guard absent attributes.
        (f"device.attributes['{NVIDIA}'].?profile.orValue('') == '1g.10gb'", MIG, True),
        (f"device.attributes['{NVIDIA}'].?profile.orValue('') == '1g.10gb'", A100, False),
        (
            f"cel.bind(g, device.attributes['{NVIDIA}'], g.type == 'gpu' && g.index == 0)",
            A100,
            True,
        ),
        (
            f"has(device.attributes['{NVIDIA}'].profile)"
            f" && device.attributes['{NVIDIA}'].profile == '1g.10gb'",
            A100,
            False,
        ),
        # A domain the device lacks is an empty map, as in Kubernetes.
        ("has(device.attributes['amd.com'].type)", A100, False),
        ("size(device.capacity['amd.com']) == 0", A100, True),
        ("device.allowMultipleAllocations", EXAMPLE, True),
        ("device.allowMultipleAllocations", A100, False),
    ],
)
def test_selectors_of_real_drivers(expression: str, device: CelDevice, expected: bool) -> None:
    assert matches(expression, device) is expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("quantity('1Gi') == quantity('1024Mi')", True),
        ("quantity('1') == quantity('1000m')", True),
        ("quantity('1') != quantity('1001m')", True),
        ("isQuantity('8Gi') && !isQuantity('8 GiB')", True),
        ("quantity('1').add(quantity('500m')) == quantity('1.5')", True),
        ("quantity('1').add(2) == quantity('3')", True),
        ("quantity('1').sub(2).sign() == -1", True),
        ("quantity('0').sign() == 0", True),
        ("quantity('1.5').isInteger()", False),
        ("quantity('2k').asInteger() == 2000", True),
        ("quantity('1.5').asApproximateFloat() == 1.5", True),
        ("semver('1.2.3').isLessThan(semver('1.10.0'))", True),
        ("semver('1.0.0-rc.1').isLessThan(semver('1.0.0'))", True),
        ("semver('1.0.0+build.5') == semver('1.0.0')", True),
        ("semver('v1.2', true) == semver('1.2.0')", True),
        ("isSemver('1.2.3') && !isSemver('1.2') && isSemver('v1.2', true)", True),
        ("semver('2.3.4').minor() == 3 && semver('2.3.4').patch() == 4", True),
    ],
)
def test_kubernetes_quantity_and_semver_functions(expression: str, expected: bool) -> None:
    assert matches(expression, A100) is expected


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        # Compile errors: syntax, an unknown function or variable, a wrong argument type.
        ("device.driver ==", "Syntax error"),
        ("device.driver == 'a' &&& true", "Syntax error"),
        ("nosuch(device)", "undeclared reference to 'nosuch'"),
        ("pod.name == 'x'", "undeclared reference to 'pod.name'"),
        ("quantity(1) == quantity('1')", "no matching overload"),
        # Evaluation errors: an absent attribute, a bad literal, mixed kinds, a wrong type.
        (f"device.attributes['{NVIDIA}'].profile == '1g.10gb'", "profile"),
        ("device.attributes['amd.com'].type == 'gpu'", "type"),
        ("quantity('eight') == quantity('8')", "'eight' is not a quantity"),
        ("semver('1.2') == semver('1.2.0')", "'1.2' is not a semantic version"),
        ("quantity('1').compareTo(semver('1.0.0')) == 0", "is not a quantity"),
        (f"device.attributes['{NVIDIA}'].type.compareTo(quantity('1')) == 0", "overload"),
        ("quantity('1.5').asInteger() == 1", "not an integer"),
        ("1 / 0 == 1", "divide by zero"),
        # Not a bool.
        (f"device.attributes['{NVIDIA}'].index", "gives int, not bool"),
        ("device.driver", "gives string, not bool"),
    ],
)
def test_a_selector_that_fails_is_an_error_never_a_match(expression: str, reason: str) -> None:
    result = matches(expression, A100)
    assert isinstance(result, SelectorError)
    assert result.expression == expression
    assert reason.lower() in result.reason.lower()
    assert expression in str(result)


def test_an_error_one_side_of_or_is_decided_by_the_other_side_as_cel_defines() -> None:
    """CEL's || and && are commutative over errors: Kubernetes gives the same answers."""
    assert matches("device.attributes['x.io'].y == 1 || true", A100) is True
    assert matches("device.attributes['x.io'].y == 1 && false", A100) is False
    assert isinstance(matches("device.attributes['x.io'].y == 1 || false", A100), SelectorError)


def test_an_expression_longer_than_kubernetes_allows_is_refused() -> None:
    long = "device.driver == '" + "a" * MAX_EXPRESSION_LENGTH + "'"
    result = compile_selector(long)
    assert isinstance(result, SelectorError)
    assert "longer than" in result.reason


def test_a_selector_compiles_once_and_evaluates_against_many_devices() -> None:
    selector = compile_selector(GPU_CLASS)
    assert isinstance(selector, Selector)
    devices = [PreparedDevice(d) for d in (A100, MIG, EXAMPLE, A100)]
    assert [selector.evaluate(d) for d in devices] == [True, False, False, True]
    # A prepared device answers other selectors too, including ones naming domains it lacks.
    other = compile_selector("has(device.attributes['amd.com'].family) || device.driver != ''")
    assert isinstance(other, Selector)
    assert [other.evaluate(d) for d in devices] == [True, True, True, True]
    assert [selector.evaluate(d) for d in devices] == [True, False, False, True]
