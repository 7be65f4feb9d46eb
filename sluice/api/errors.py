"""Errors raised when an object read from the cluster (or a dump) cannot be understood."""

from __future__ import annotations


class InvalidObject(ValueError):
    """An object whose field cannot be read; the message names the object and the field."""

    def __init__(self, kind: str, name: str, field: str, problem: str) -> None:
        self.kind = kind
        self.name = name
        self.field = field
        self.problem = problem
        super().__init__(f"{kind} {name}: field {field}: {problem}")


class ConfigError(ValueError):
    """A scheduler configuration that cannot be used; the message names the key."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        self.problem = problem
        super().__init__(f"scheduler configuration: {key}: {problem}")
