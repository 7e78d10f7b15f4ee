"""Knowing at once that a process exited, without reaping it and without SIGCHLD.

The scheduler loop polls its executor every couple of seconds; a GPU freed by a job that just
ended would idle until then. :class:`ExitWatcher` holds a Linux pidfd (``pidfd_open``, 5.3+)
per watched process and a thread blocked in ``poll()`` on them: a pidfd turns readable when its
process exits, for our children and for processes adopted after a restart alike, and reading
that never reaps the child, so the executor's own ``waitid``/``waitpid`` still get the exit
status. The thread only calls the callback; the executor's state stays with its one caller.
Where pidfds do not exist (older kernels, other systems) nothing is watched and the caller's
poll interval applies.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
from collections.abc import Callable

SUPPORTED = hasattr(os, "pidfd_open") and hasattr(select, "poll")


class ExitWatcher:
    """Calls ``on_exit()`` from its own thread soon after any watched process exits.

    One call may stand for several exits; the callee should look at everything (poll the
    executor), not at one process. :meth:`watch` and :meth:`close` are thread-safe.
    """

    def __init__(self, on_exit: Callable[[], None]) -> None:
        self._on_exit = on_exit
        self._lock = threading.Lock()
        self._new: list[int] = []  # pidfds the thread has not registered yet
        self._closed = False
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="railyard-exits", daemon=True)
        self._thread.start()

    def watch(self, pid: int) -> None:
        """Watch ``pid``; a process already gone is reported at once. Out of descriptors
        (or any other refusal), the process goes unwatched: the caller's poll still sees it."""
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            self._on_exit()
            return
        except OSError:
            return
        with self._lock:
            if self._closed:
                os.close(fd)
                return
            self._new.append(fd)
            os.write(self._wake_w, b"+")

    def close(self) -> None:
        """Stop the thread and close every pidfd; watched processes are not touched."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            os.write(self._wake_w, b"x")
        self._thread.join(timeout=5)

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        watched: set[int] = set()
        try:
            while True:
                exited = False
                for fd, _ in poller.poll():
                    if fd == self._wake_r:
                        os.read(self._wake_r, 4096)
                        continue
                    poller.unregister(fd)  # readable for good once exited: watch no longer
                    watched.discard(fd)
                    os.close(fd)
                    exited = True
                with self._lock:
                    if self._closed:
                        return
                    new, self._new = self._new, []
                for fd in new:
                    poller.register(fd, select.POLLIN)
                    watched.add(fd)
                if exited:
                    self._on_exit()
        finally:
            with self._lock:
                self._closed = True
                for fd in [*watched, *self._new, self._wake_r, self._wake_w]:
                    with contextlib.suppress(OSError):
                        os.close(fd)
                self._new = []
