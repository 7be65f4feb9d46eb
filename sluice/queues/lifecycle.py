"""Queue lifecycle: derived status.state, and the cascade steps the operator must write."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

QueueActionKind = Literal["create", "close", "reopen", "delete", "invalid", "valid"]


@dataclass(frozen=True, slots=True)
class QueueAction:
    """A lifecycle step: create root/default, cascade close/reopen/delete, mark invalid/valid."""

    action: QueueActionKind
    queue: str
    reason: str = ""
