"""The answer of a queue rule: allowed or denied, the rule's id, and a message for people."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    rule: str = ""
    """A short stable id (``guarantee-sum``, ``delete-not-closed``): metrics and tests use it."""
    message: str = ""
    """Names the queue, the rule and the numbers; what a tenant reads when kubectl refuses."""
    warnings: tuple[str, ...] = ()

    def with_warnings(self, warnings: tuple[str, ...]) -> Verdict:
        return Verdict(self.allowed, self.rule, self.message, self.warnings + warnings)


ALLOW = Verdict(True)


def deny(rule: str, message: str) -> Verdict:
    return Verdict(False, rule, message)
