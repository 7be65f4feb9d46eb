"""The serving certificate, reloaded when its files change (rotation without a restart).

Each new handshake is handed the context built from the newest pair that loaded cleanly. A
pair is loaded into a fresh context and only swapped in once it succeeded: reloading the live
context in place would leave it holding a new certificate with the old key when the files are
caught mid-rotation (certificate written, key not yet), and every handshake would fail.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from pathlib import Path

log = logging.getLogger("sluice.webhooks")


def _server_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


class ReloadingTLS:
    """``context`` is what the listener uses; it hands every handshake the current pair.

    New connections get the new certificate; open ones keep theirs, so a rotation drops no
    request.
    """

    def __init__(self, cert_file: Path, key_file: Path) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self._stamp = self._mtimes()
        self._current = _server_context(cert_file, key_file)
        # The listener's own pair is the first one: a handshake always finds a certificate.
        self.context = _server_context(cert_file, key_file)
        self.context.sni_callback = self._select

    def _select(
        self, connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _: ssl.SSLContext
    ) -> None:
        # Called for every ClientHello, with or without SNI (None for an IP address).
        connection.context = self._current

    def _mtimes(self) -> tuple[float, float]:
        return (os.stat(self.cert_file).st_mtime, os.stat(self.key_file).st_mtime)

    def reload(self) -> bool:
        """Swap in the pair on disk if it changed; raises (and keeps the old one) if it does
        not load."""
        stamp = self._mtimes()
        if stamp == self._stamp:
            return False
        self._current = _server_context(self.cert_file, self.key_file)
        self._stamp = stamp
        return True

    async def watch(self, interval: float = 2.0) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                if self.reload():
                    log.info("event=tls-reloaded cert=%s", self.cert_file)
            except (OSError, ssl.SSLError) as err:
                # Mid-rotation the pair may not match yet: keep serving the old one.
                log.warning("event=tls-reload-failed error=%r", err)
