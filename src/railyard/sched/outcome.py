"""The outcome of admitting one job in a cycle, as a value (Kueue's entry status, in spirit).

`Verdict` is ordered from worst to best for the job, so the best of several is `max()`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from railyard.sched.decisions import Reason


class Verdict(IntEnum):
    WAITING = 0  # stays pending, with a reason (and maybe a reservation)
    PREEMPTING = 1  # victims were signalled; their GPUs are held for it
    DEFERRED = 2  # fits only by borrowing: decided again after every non-borrower
    STARTED = 3


@dataclass(frozen=True, slots=True)
class Outcome:
    verdict: Verdict
    reason: Reason | None = None

    @classmethod
    def waiting(cls, reason: Reason) -> Outcome:
        return _WAITING[reason]


STARTED = Outcome(Verdict.STARTED)
DEFERRED = Outcome(Verdict.DEFERRED)
PREEMPTING = Outcome(Verdict.PREEMPTING, Reason.PREEMPTING)
_WAITING = {r: Outcome(Verdict.WAITING, r) for r in Reason}
