"""A Kubernetes label selector (``matchLabels`` and ``matchExpressions``), as Queue's
``spec.namespaceSelector`` holds it: reading, matching and the text people know from kubectl.

Matching follows Kubernetes: every ``matchLabels`` pair and every expression must hold;
``In``/``NotIn`` take a non-empty list of values, ``Exists``/``DoesNotExist`` none; an empty
selector matches everything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""Set by the API server on every Namespace, equal to its name, and immutable."""

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist"]


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class SelectorRequirement(_Model):
    key: str = Field(min_length=1)
    operator: Operator
    values: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _values_fit_operator(self) -> SelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} of key {self.key} needs values")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} of key {self.key} takes no values")
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "In":
            return labels.get(self.key) in self.values
        if self.operator == "NotIn":
            return labels.get(self.key) not in self.values
        if self.operator == "Exists":
            return self.key in labels
        return self.key not in labels

    def describe(self) -> str:
        if self.operator == "Exists":
            return self.key
        if self.operator == "DoesNotExist":
            return f"!{self.key}"
        word = "in" if self.operator == "In" else "notin"
        return f"{self.key} {word} ({','.join(self.values)})"


class LabelSelector(_Model):
    match_labels: Mapping[str, str] = Field(default_factory=dict)
    match_expressions: tuple[SelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            e.matches(labels) for e in self.match_expressions
        )

    def describe(self) -> str:
        """As kubectl writes selectors: ``team=a,env in (prod,dev),!legacy``; ``<any>``
        for the empty selector, which matches everything."""
        parts = [f"{k}={v}" for k, v in sorted(self.match_labels.items())]
        parts.extend(e.describe() for e in self.match_expressions)
        return ",".join(parts) or "<any>"


def namespace_labels(name: str, labels: Mapping[str, str]) -> dict[str, str]:
    """A namespace's labels as a selector sees them, with the name label the API server
    always sets (dumps and old objects may lack it)."""
    return {**labels, NAMESPACE_NAME_LABEL: name}
