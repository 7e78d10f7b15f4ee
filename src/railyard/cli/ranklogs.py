"""The other tasks of a job that ``railyard run`` joined at its first task.

``srun -n 4 hostname`` from a login node prints four lines; the terminal relays the first
task only, so the others' output is read from their logs as it is written (their header
lines left out) and printed beside it, on stdout. With ``-l`` every line, the first task's
too, comes after its rank, as srun's ``--label`` writes it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

from railyard.client.client import Client
from railyard.client.tasklabels import label_of

HEADER = "==== "  # the lines each task's log starts with (exec.task.jobfiles.header)
FOLLOW_POLL_S = 0.25
JOIN_POLL_S = 0.5
MAX_READS_PER_S = 20.0  # one run's reads of its other tasks' logs, whatever their number


class Output:
    """Whole lines to fds 1 and 2, one writer at a time, each after its task's prefix; a
    partial line waits for its end (or :meth:`flush`), kept per task and fd."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._partial: dict[tuple[int, int], tuple[bytes, bytes]] = {}  # (rank, fd) ->

    def write(self, rank: int, fd: int, data: bytes, prefix: bytes = b"") -> None:
        with self._lock:
            text = self._partial.pop((rank, fd), (b"", b""))[1] + data
            *lines, rest = text.split(b"\n")
            if rest:
                self._partial[(rank, fd)] = (prefix, rest)
            if lines:
                _write_all(fd, b"".join(prefix + line + b"\n" for line in lines))

    def flush(self, rank: int | None = None) -> None:
        """Each partial line (of task ``rank``, or of all), ended: its task's output closed."""
        with self._lock:
            for (of, fd), (prefix, rest) in list(self._partial.items()):
                if rank is None or of == rank:
                    _write_all(fd, prefix + rest + b"\n")
                    del self._partial[(of, fd)]


class OtherRanks:
    """Follows the logs of ranks 1..ntasks-1 of a running job: one thread on one connection
    reads each rank in turn, a round every :data:`FOLLOW_POLL_S` at most and never more than
    :data:`MAX_READS_PER_S` reads a second, however many tasks (a run of 256 tasks must not
    load the server for everyone else)."""

    def __init__(
        self,
        connect: Callable[[], AbstractContextManager[Client]],
        job_id: str,
        ntasks: int,
        out: Output,
        label: bool,
    ) -> None:
        self._connect, self._job_id, self._out = connect, job_id, out
        self._prefixes = {r: label_of(r, ntasks) if label else b"" for r in range(1, ntasks)}
        self._thread = threading.Thread(target=self._follow, daemon=True)

    def start(self) -> None:
        if self._prefixes:
            self._thread.start()

    def join(self) -> None:
        """Until every other task's log is read to its end (the job ended), as srun waits
        for all its tasks."""
        while self._thread.is_alive():
            self._thread.join(JOIN_POLL_S)  # a Ctrl-C meanwhile is seen at once

    def _follow(self) -> None:
        offsets = dict.fromkeys(self._prefixes, 0)
        in_header = dict.fromkeys(self._prefixes, True)
        partial = dict.fromkeys(self._prefixes, "")
        pause_s = max(FOLLOW_POLL_S, len(offsets) / MAX_READS_PER_S)
        with self._connect() as client:
            while offsets:
                for rank in list(offsets):
                    chunk = client.logs(self._job_id, rank=rank, offset=offsets[rank])
                    *lines, partial[rank] = (partial[rank] + chunk["text"]).split("\n")
                    for line in lines:
                        if in_header[rank] and line.startswith(HEADER):
                            continue
                        in_header[rank] = False
                        self._out.write(rank, 1, line.encode() + b"\n", self._prefixes[rank])
                    offsets[rank] = chunk["offset"]
                    if chunk["finished"]:  # the job ended and this log is read to its end
                        if partial[rank]:
                            self._out.write(rank, 1, partial[rank].encode() + b"\n",
                                            self._prefixes[rank])  # fmt: skip
                        del offsets[rank]
                if offsets:
                    time.sleep(pause_s)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]
