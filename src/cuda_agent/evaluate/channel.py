"""Length-prefixed JSON messages over a socket: the only channel between the harness and a worker.

Data only, never pickle: a message from a candidate's process is parsed as JSON and validated by
the receiver, so no object of the candidate's can be smuggled into a trusted process (category 12).
"""

from __future__ import annotations

import json
import select
import socket
import struct
import time
from typing import Any

MAX_MESSAGE = 64 * 1024 * 1024
_HEADER = struct.Struct("!I")


class ChannelClosed(Exception):
    """The peer closed the channel (usually: its process died)."""


class ChannelTimeout(TimeoutError):
    """No complete message arrived before the deadline."""


class ChannelError(Exception):
    """The peer sent something that is not a well-formed message."""


class Channel:
    def __init__(self, sock: socket.socket):
        self.sock = sock

    def send(self, msg: dict[str, Any]) -> None:
        data = json.dumps(msg, separators=(",", ":")).encode()
        if len(data) > MAX_MESSAGE:
            raise ChannelError(f"message of {len(data)} bytes exceeds {MAX_MESSAGE}")
        self.sock.sendall(_HEADER.pack(len(data)) + data)

    def recv(self, timeout: float | None = None) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        (size,) = _HEADER.unpack(self._read(_HEADER.size, deadline))
        if size > MAX_MESSAGE:
            raise ChannelError(f"peer announced a message of {size} bytes (limit {MAX_MESSAGE})")
        try:
            msg = json.loads(self._read(size, deadline))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ChannelError(f"peer sent a message that is not JSON: {exc}") from None
        if not isinstance(msg, dict):
            raise ChannelError("peer sent a JSON value that is not an object")
        return msg

    def _read(self, n: int, deadline: float | None) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                    raise ChannelTimeout(f"no message within the time limit ({len(buf)}/{n} bytes)")
            chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise ChannelClosed("peer closed the channel")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()
