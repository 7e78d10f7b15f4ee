"""The frames of an interactive job's terminal (``railyard run``): the client's vocabulary,
which the server side (:mod:`railyard.exec.terminals.terminal`, the API's WebSocket) speaks too.

One type byte, a 4-byte big-endian length, the payload. To the task: ``i`` stdin bytes, ``e``
end of stdin, ``w`` window size (rows, columns: two 16-bit numbers), ``s`` a signal's name.
From the task: ``o`` stdout, ``r`` stderr, ``x`` the end (the exit status as
``Popen.returncode`` spells it: negative for a signal).
"""

from __future__ import annotations

import struct

STDIN, STDIN_END, WINDOW, SIGNAL = b"i", b"e", b"w", b"s"
STDOUT, STDERR, EXIT = b"o", b"r", b"x"
TO_TASK = frozenset((STDIN, STDIN_END, WINDOW, SIGNAL))
FROM_TASK = frozenset((STDOUT, STDERR, EXIT))
# Signals a client may send (srun forwards these); never SIGKILL or SIGSTOP through here.
CLIENT_SIGNALS = frozenset(("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGTSTP", "SIGCONT",
                            "SIGUSR1", "SIGUSR2", "SIGWINCH"))  # fmt: skip
HEADER = struct.Struct(">cI")
MAX_FRAME_BYTES = 1 << 20
CHUNK_BYTES = 65536
# One WebSocket message to a terminal: a whole frame of the largest size fits; the client
# sends one frame of at most CHUNK_BYTES of input per message.
MAX_MESSAGE_BYTES = MAX_FRAME_BYTES + HEADER.size


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


def _too_large(length: int) -> ValueError:
    return ValueError(f"a terminal frame of {length} bytes (at most {MAX_FRAME_BYTES})")


class FrameReader:
    """Splits a byte stream into (type, payload) frames; a frame over the cap is an error.

    Linear in the bytes fed: frames are read at an offset into one buffer, which drops what
    was read once per feed (slicing the rest off after each frame made a megabyte of tiny
    frames cost seconds, issue 52)."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[bytes, bytes]]:
        self._buffer += data
        buffer, offset, out = self._buffer, 0, []
        while len(buffer) - offset >= HEADER.size:
            kind, length = HEADER.unpack_from(buffer, offset)
            if length > MAX_FRAME_BYTES:
                raise _too_large(length)
            end = offset + HEADER.size + length
            if len(buffer) < end:
                break
            out.append((kind, bytes(buffer[offset + HEADER.size : end])))
            offset = end
        del buffer[:offset]
        return out


class FrameChecker:
    """Checks a byte stream of frames as it passes (each one's type among ``kinds``, its
    length within the cap) without copying a payload: for a relay that forwards the bytes
    as they came. Linear in the frames; a bad frame raises ValueError."""

    def __init__(self, kinds: frozenset[bytes]) -> None:
        self.kinds = kinds
        self._payload_left = 0  # bytes of the current frame's payload still to come
        self._head = b""  # a header split across feeds

    def check(self, data: bytes) -> None:
        offset = min(self._payload_left, len(data))
        self._payload_left -= offset
        if self._head and offset < len(data):
            need = HEADER.size - len(self._head)
            self._head += data[offset : offset + need]
            offset += need
            if len(self._head) < HEADER.size:
                return
            self._payload_left = self._frame(self._head, 0)
            self._head = b""
            taken = min(self._payload_left, len(data) - offset)
            offset, self._payload_left = offset + taken, self._payload_left - taken
        size = len(data)
        while size - offset >= HEADER.size:
            offset += HEADER.size + self._frame(data, offset)
        if offset > size:
            self._payload_left = offset - size
        elif offset < size:
            self._head = data[offset:]

    def _frame(self, data: bytes, offset: int) -> int:
        kind, length = HEADER.unpack_from(data, offset)
        if kind not in self.kinds:
            raise ValueError(f"frame type {kind!r} is not for the task")
        if length > MAX_FRAME_BYTES:
            raise _too_large(length)
        return int(length)
