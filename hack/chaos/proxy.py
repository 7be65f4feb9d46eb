"""Local TCP proxies: a round-robin in front of the webhook replicas, and the link between one
operator replica and the API server, which a fault can cut.

A proxy forwards bytes only, so TLS passes through untouched (the API server's certificate
names 127.0.0.1, whatever port the client dials). A link is in one of three states:

- ``open``: bytes flow;
- ``drop``: every connection is reset at once and every new one is reset on accept (the
  replica sees errors right away);
- ``blackhole``: connections stay open but bytes vanish both ways, new ones are accepted
  and never answered (the replica sees nothing at all: only its own timeouts tell it).

Healing closes the connections that lived through the fault, as a real network does once
their peers' retransmissions time out: the replica dials again.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import struct
import threading
from collections.abc import Sequence

LOOPBACK = "127.0.0.1"
CHUNK = 65536


class Proxy:
    def __init__(self, targets: Sequence[int], name: str) -> None:
        """``targets``: ports on 127.0.0.1 tried in turn (round-robin), a dead one skipped."""
        self.name = name
        self.targets = list(targets)
        self._turn = itertools.count()
        self.state = "open"
        self._lock = threading.Lock()
        self._pairs: set[tuple[socket.socket, socket.socket | None]] = set()
        self._listener = socket.create_server((LOOPBACK, 0))
        self.port: int = self._listener.getsockname()[1]
        self._stopped = False
        threading.Thread(target=self._accept, name=f"proxy-{name}", daemon=True).start()

    # faults -------------------------------------------------------------------------------
    def cut(self, mode: str) -> None:
        """``drop`` or ``blackhole`` (see the module docstring)."""
        assert mode in ("drop", "blackhole")
        with self._lock:
            self.state = mode
            pairs = list(self._pairs) if mode == "drop" else []
        for pair in pairs:
            self._close(pair)

    def heal(self) -> None:
        with self._lock:
            self.state = "open"
            pairs = list(self._pairs)
        for pair in pairs:
            self._close(pair)

    def stop(self) -> None:
        self._stopped = True
        with contextlib.suppress(OSError):
            self._listener.close()
        self.heal()

    # forwarding ---------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            state = self.state
            if state == "drop":
                _reset(client)
                continue
            upstream = None if state == "blackhole" else self._dial()
            if upstream is None and state == "open":
                _reset(client)  # no target answers: as a refused connection
                continue
            pair = (client, upstream)
            with self._lock:
                self._pairs.add(pair)
            threading.Thread(target=self._pump, args=(pair, client, upstream), daemon=True).start()
            if upstream is not None:
                threading.Thread(
                    target=self._pump, args=(pair, upstream, client), daemon=True
                ).start()

    def _dial(self) -> socket.socket | None:
        for _ in range(len(self.targets)):
            port = self.targets[next(self._turn) % len(self.targets)]
            try:
                return socket.create_connection((LOOPBACK, port), timeout=2)
            except OSError:
                continue
        return None

    def _pump(
        self,
        pair: tuple[socket.socket, socket.socket | None],
        source: socket.socket,
        sink: socket.socket | None,
    ) -> None:
        try:
            source.settimeout(None)
            while True:
                data = source.recv(CHUNK)
                if not data:
                    break
                if self.state != "open" or sink is None:
                    continue  # a blackhole: the bytes vanish
                sink.sendall(data)
        except OSError:
            pass
        self._close(pair)

    def _close(self, pair: tuple[socket.socket, socket.socket | None]) -> None:
        with self._lock:
            self._pairs.discard(pair)
        for sock in pair:
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()


def _reset(sock: socket.socket) -> None:
    """Close with RST rather than FIN: the peer sees a reset connection."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()
