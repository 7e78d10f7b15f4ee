"""The frames of an interactive job's terminal (``railyard run``): the client's vocabulary,
which the server side (:mod:`railyard.exec.terminal`, the API's WebSocket) speaks too.

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


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


class FrameReader:
    """Splits a byte stream into (type, payload) frames; a frame over the cap is an error."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[tuple[bytes, bytes]]:
        self._buffer += data
        out = []
        while len(self._buffer) >= HEADER.size:
            kind, length = HEADER.unpack_from(self._buffer)
            if length > MAX_FRAME_BYTES:
                raise ValueError(f"a terminal frame of {length} bytes (at most {MAX_FRAME_BYTES})")
            end = HEADER.size + length
            if len(self._buffer) < end:
                break
            out.append((kind, self._buffer[HEADER.size : end]))
            self._buffer = self._buffer[end:]
        return out
