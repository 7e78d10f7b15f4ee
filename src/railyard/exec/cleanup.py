"""Ending what an ended step leaves behind (its cgroups, its containers), off the poll's thread.

A step's report waits for its processes to be gone (a job whose stragglers still ran was
settled, its GPUs given to the next job): the poll kills the step for a moment, and reports
it when that was enough; otherwise the report rides with the leftovers and is released here
once the kill has been tried in full. Removing its groups and containers comes after.
Killing a step's stray processes and removing its groups waits up to
``proctrack.KILL_TIMEOUT_S`` for a process stuck in the kernel, and ``podman rm`` up to
``RM_TIMEOUT_S``: on the control plane's loop thread either held every job's scheduling, and
an exception from either lost that report and every other one of the same poll. So
:class:`Cleaner` runs them on a thread of its own; a part that fails (a process that will not
die, a group that will not go, a runtime that times out) is counted, logged and tried again
later, with a growing pause, until it is done.
:meth:`Cleaner.drain` waits for what is queued (an agent about to go, a discarded share).
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from railyard.exec.cgroups.containment import Containment
from railyard.exec.containers.container import PODMAN, remove_containers
from railyard.exec.protocol import ExitReport
from railyard.exec.task.steps import leftovers

log = logging.getLogger("railyard.exec")
RM_TIMEOUT_S = 60.0  # one `podman rm` of a step's containers
FIRST_RETRY_S = 1.0  # the pause after a first failure; doubled after each, up to:
MAX_RETRY_S = 60.0


@dataclass
class Leftovers:
    """What one ended step may leave: its groups (``step``: None for a step with no
    processes) and its containers (``containers``, and those the step's launcher recorded
    under ``records``)."""

    step: str | None
    records: Path | None
    restart_count: int
    containers: tuple[str, ...] = ()
    report: ExitReport | None = None  # released once the step's processes were killed
    groups_done: bool = False
    containers_done: bool = False
    tries: int = 0
    due_t_s: float = field(default=0.0)


class Cleaner:
    """One thread that ends steps' leftovers in order; failures are retried and counted."""

    def __init__(
        self,
        containment: Containment,
        *,
        clock: Callable[[], float] = time.monotonic,
        first_retry_s: float = FIRST_RETRY_S,
        released: Callable[[ExitReport], None] | None = None,
    ) -> None:
        self.containment = containment
        self.released = released  # takes a report whose step's kill was tried in full
        self.rm_timeout_s = RM_TIMEOUT_S
        self.first_retry_s = first_retry_s
        self.failures = 0  # parts that failed, each try counted (`railyard_...` via executor)
        self._clock = clock
        self._queue: list[Leftovers] = []
        self._busy = 0  # items taken from the queue and being worked on
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def submit(self, item: Leftovers) -> None:
        """Queue ``item``; returns at once."""
        with self._cond:
            item.due_t_s = self._clock()
            self._queue.append(item)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="railyard-cleanup", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def pending(self) -> int:
        """Steps whose leftovers are not all gone yet."""
        with self._cond:
            return len(self._queue) + self._busy

    def drain(self, timeout_s: float) -> bool:
        """Try everything queued now (no pause) and wait up to ``timeout_s`` for it to be
        done; True when nothing is left."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            for item in self._queue:
                item.due_t_s = 0.0
            self._cond.notify_all()
            while self._queue or self._busy:
                left_s = deadline - time.monotonic()
                if left_s <= 0:
                    return False
                self._cond.wait(left_s)
            return True

    def _run(self) -> None:
        while True:
            with self._cond:
                item = self._next_due()
                if item is None:
                    continue
                self._queue.remove(item)
                self._busy += 1
            try:
                done = self._clean(item)
            except Exception:  # never lose the item: it is tried again
                log.exception("cleanup of step %s failed", item.step)
                done = False
            with self._cond:
                self._busy -= 1
                if done is None:  # its report went: its containers next, after other reports
                    item.due_t_s = self._clock()
                    self._queue.append(item)
                elif not done:
                    self.failures += 1
                    item.tries += 1
                    pause_s = min(MAX_RETRY_S, self.first_retry_s * 2 ** (item.tries - 1))
                    item.due_t_s = self._clock() + pause_s
                    self._queue.append(item)
                self._cond.notify_all()

    def _next_due(self) -> Leftovers | None:
        """The first item due now, waiting (with the lock held by the caller) until one is;
        None after a wake-up that found none due yet."""
        if not self._queue:
            self._cond.wait()
            return None
        now_t_s = self._clock()
        # a report waiting on its step's kill goes before any other work that is due
        item = min(self._queue, key=lambda i: (i.due_t_s > now_t_s, i.report is None, i.due_t_s))
        if item.due_t_s > now_t_s:
            self._cond.wait(item.due_t_s - now_t_s)
            return None
        return item

    def _clean(self, item: Leftovers) -> bool | None:
        """One try at each part not done yet; True when both are. None: the step's report
        was just let go, and its containers are for a later turn (a slow ``podman rm`` must
        not hold the next step's report)."""
        if not item.groups_done:
            item.groups_done = item.step is None or self.containment.end(item.step)
            if not item.groups_done:
                log.warning("step %s: its processes or groups are not gone yet", item.step)
        if item.report is not None and self.released is not None:
            # killed, or a process stuck in the kernel past the kill's timeout: reported now
            # either way, as before, and its groups tried again until they go
            report, item.report = item.report, None
            self.released(report)
            if not item.containers_done:
                return None
        if not item.containers_done:
            names = [*item.containers, *leftovers(item.step, item.records, item.restart_count)]
            try:
                item.containers_done = remove_containers(names, timeout_s=self.rm_timeout_s)
                if not item.containers_done:
                    log.warning("step %s: %s rm failed", item.step, PODMAN)
            except (subprocess.SubprocessError, OSError) as exc:
                log.warning("step %s: removing its containers failed: %s", item.step, exc)
        return item.groups_done and item.containers_done
