"""The event core: a heap of (time_s, priority, sequence, event) on a virtual clock.

Like SimPy's core, the sequence number breaks ties so two events are never compared, and the
priority orders events of one instant: the world changes first (failures, repairs, exits),
then new work arrives, and the scheduler cycle runs last so it sees the whole instant at once.
The engine knows nothing about jobs; the driver hands it a handler.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum


class EventKind(IntEnum):
    """Event kinds; the value is the priority within one timestamp (lower runs first)."""

    FAILURE = 0  # a node goes down
    REPAIR = 1  # a node comes back
    ADMIN = 2  # an admin drains or resumes a node
    SWEEP = 3  # an admin asks for an across-node sweep
    DEGRADE = 4  # a node turns slow without failing, or is repaired of it
    CHECKED = 5  # a node's health check ends
    FINISH = 6  # an attempt's work is done (or its trace duration is over)
    GRACE_EXPIRY = 7  # a preempted job that did not stop in its grace is killed
    PREEMPT_STOP = 8  # a preempted job wrote its checkpoint and stops
    CHECKPOINT = 9  # a running job completed a checkpoint
    REQUEUE = 10  # a stopped job goes back to the pending queue
    SUBMIT = 11  # a job arrives
    PREEMPT_SIGNAL = 12  # the scheduler asked a job to checkpoint and stop (recorded)
    START = 13  # the scheduler started a job (recorded)
    END = 14  # a job reached its final state (recorded)
    DEADLINE = 15  # a time-limit warning or limit falls due: step then
    CHECK_DUE = 16  # a periodic health check falls due: step then
    TICK = 17  # the periodic cycle, as the live loop's interval
    CYCLE = 18  # a scheduler cycle, coalesced per timestamp


@dataclass(frozen=True, slots=True)
class Event:
    kind: EventKind
    job_id: str = ""
    node: str = ""
    attempt: int = 0


Handler = Callable[[float, Event], None]


class Engine:
    """A virtual clock and an event heap. `run` pops events in order and calls the handler."""

    def __init__(self) -> None:
        self.now_t_s = 0.0
        self.events_processed = 0
        self._heap: list[tuple[float, int, int, Event]] = []
        self._seq = 0
        self._stopped = False

    def __len__(self) -> int:
        return len(self._heap)

    def schedule(self, t_s: float, event: Event) -> None:
        """Queue `event` at `t_s`; times in the past are an error (the clock never runs back)."""
        if t_s < self.now_t_s:
            raise ValueError(f"event {event.kind.name} at {t_s} s is before now ({self.now_t_s} s)")
        self._seq += 1
        heapq.heappush(self._heap, (t_s, int(event.kind), self._seq, event))

    def stop(self) -> None:
        """Ask `run` to return after the current event."""
        self._stopped = True

    def run(self, handler: Handler, *, until_t_s: float = float("inf")) -> None:
        """Process events in (time, priority, sequence) order until none are left."""
        heap = self._heap
        pop = heapq.heappop
        self._stopped = False
        while heap and not self._stopped:
            if heap[0][0] > until_t_s:
                break
            t_s, _, _, event = pop(heap)
            self.now_t_s = t_s
            self.events_processed += 1
            handler(t_s, event)
