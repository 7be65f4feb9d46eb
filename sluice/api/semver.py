"""Semantic versions as Kubernetes' CEL semver library reads them (Semantic Versioning 2.0.0):
DRA device attributes of type `version`, and `semver()` in a device selector.

Strict parsing takes only `MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]`; normalising parsing (the
library's `semver(text, true)`) also takes a leading `v`, a missing minor or patch, and leading
zeros. Build metadata never counts in a comparison, and so is not kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

_STRICT: Final = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)
_LOOSE_CORE: Final = re.compile(r"v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(.*)", re.DOTALL)


class SemverError(ValueError):
    """A string that is not a semantic version."""


@dataclass(frozen=True, slots=True, order=False)
class Semver:
    major: int
    minor: int
    patch: int
    prerelease: tuple[int | str, ...] = ()

    def __str__(self) -> str:
        core = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            core += "-" + ".".join(str(part) for part in self.prerelease)
        return core

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1, by Semantic Versioning 2.0.0's precedence."""
        mine = (self.major, self.minor, self.patch)
        theirs = (other.major, other.minor, other.patch)
        if mine != theirs:
            return -1 if mine < theirs else 1
        return _compare_prerelease(self.prerelease, other.prerelease)


def parse_semver(text: str, normalize: bool = False) -> Semver:
    """The version `text` names; SemverError when it is none."""
    if normalize:
        text = _normalized(text)
    match = _STRICT.fullmatch(text)
    if match is None:
        raise SemverError(f"{text!r} is not a semantic version (expected e.g. 1.2.3)")
    major, minor, patch, prerelease, _build = match.groups()
    parts: tuple[int | str, ...] = ()
    if prerelease:
        parts = tuple(int(p) if p.isdigit() else p for p in prerelease.split("."))
    return Semver(int(major), int(minor), int(patch), parts)


def is_semver(text: str, normalize: bool = False) -> bool:
    try:
        parse_semver(text, normalize)
    except SemverError:
        return False
    return True


def _normalized(text: str) -> str:
    """`v1.2` -> `1.2.0`, `01.002.3` -> `1.2.3`; the rest (pre-release, build) as given."""
    match = _LOOSE_CORE.fullmatch(text)
    if match is None:
        return text
    major, minor, patch, rest = match.groups()
    numbers = [str(int(n)) for n in (major, minor or "0", patch or "0")]
    return ".".join(numbers) + rest


def _compare_prerelease(left: tuple[int | str, ...], right: tuple[int | str, ...]) -> int:
    if left == right:
        return 0
    # A version without a pre-release outranks any pre-release of the same core.
    if not left:
        return 1
    if not right:
        return -1
    for a, b in zip(left, right, strict=False):
        if a == b:
            continue
        if isinstance(a, int) and isinstance(b, int):
            return -1 if a < b else 1
        if isinstance(a, int):  # numeric identifiers rank below alphanumeric ones
            return -1
        if isinstance(b, int):
            return 1
        return -1 if a < b else 1
    return -1 if len(left) < len(right) else 1
