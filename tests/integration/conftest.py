"""A real webhook server over HTTPS on 127.0.0.1, fed a Queue cache directly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from webhook_harness import CertificateAuthority, Webhook, _ca, _webhook


@pytest.fixture
def ca(tmp_path: Path) -> tuple[CertificateAuthority, Path]:
    return _ca(tmp_path)


@pytest.fixture
async def webhook(tmp_path: Path, ca: tuple[CertificateAuthority, Path]) -> AsyncIterator[Webhook]:
    async for server in _webhook(tmp_path, ca):
        yield server
