"""``srun -l/--label``: each line a task writes, on srun's stdout or stderr, after its rank.

As srun 22.05 prints them: ``0: text``, the rank right-aligned to the width of the largest
one (`` 3: `` among 16 tasks), so sorted output reads by task. A task's last line without a
newline is written labelled when the task closes its output, with a newline, so the next
label starts a line.
"""

from __future__ import annotations

import threading
from typing import IO

from railyard.client.tasklabels import label_of

__all__ = ["Labeller", "label_of"]

DRAIN_S = 2.0  # how long srun waits, once its tasks ended, for output their children hold


class Labeller:
    """Copies tasks' pipes to srun's own output, one whole line at a time under one lock,
    so lines of different tasks never interleave mid-line."""

    def __init__(self, stdout: IO[bytes], stderr: IO[bytes]) -> None:
        self._out = {1: stdout, 2: stderr}
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def follow(self, pipe: IO[bytes], fd: int, prefix: bytes) -> None:
        """Copy ``pipe`` (a task's stdout, fd 1, or stderr, fd 2) until it closes."""
        thread = threading.Thread(target=self._copy, args=(pipe, fd, prefix), daemon=True)
        thread.start()
        self._threads.append(thread)

    def _copy(self, pipe: IO[bytes], fd: int, prefix: bytes) -> None:
        sink = self._out[fd]
        with pipe:
            for line in iter(pipe.readline, b""):
                with self._lock:
                    sink.write(prefix + line if line.endswith(b"\n") else prefix + line + b"\n")
                    sink.flush()

    def drain(self, timeout_s: float = DRAIN_S) -> None:
        """Wait for the copies to end (a task's child that keeps its output open is not
        waited for longer than ``timeout_s``)."""
        for thread in self._threads:
            thread.join(timeout_s)
