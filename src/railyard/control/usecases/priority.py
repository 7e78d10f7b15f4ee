"""What priority a job is stored with, and the bound a plain user may not go above.

Priority preemption lets a higher-priority job evict a running one, so a priority is a claim
on other users' GPUs: as Kueue's ``WorkloadPriorityClass`` (chosen from those an admin made)
and Slurm's ``--nice`` (users may only lower theirs), a plain member of a queue asks at most
the queue's ``max_priority``; admins may ask any. ``nice`` lowers the priority, as in Slurm;
a negative nice raises it, so it is an admin's too.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from railyard.client.bounds import INT32_MAX
from railyard.client.values import PRIORITY_CLASSES, priority_label
from railyard.control.errors import Forbidden
from railyard.control.store.bulk import queue_settings
from railyard.control.store.tables import DEFAULT_MAX_PRIORITY, User
from railyard.control.submission import JobSubmit

DEFAULT_PRIORITY = PRIORITY_CLASSES["normal"]  # railyard.sched.model.PriorityClass.NORMAL


def _asked(spec: JobSubmit, value: int) -> str:
    """The priority as the user spelled it: ``1000000`` or ``'critical' (10000)``."""
    if spec.priority is not None and spec.priority.by_name:
        return priority_label(value)
    return str(value)


def job_priority(session: Session, user: User, spec: JobSubmit) -> int:
    """The priority to store for ``spec`` (after ``nice``); Forbidden (403) when a plain user
    asks above the queue's bound or gives a negative nice. A job that asks no priority gets
    the default class, or the queue's bound where that is lower, so asking nothing is never
    refused."""
    row = queue_settings(session, spec.queue)
    bound = row.max_priority if row is not None else DEFAULT_MAX_PRIORITY
    if spec.priority is None:
        base = DEFAULT_PRIORITY if user.is_admin else min(DEFAULT_PRIORITY, bound)
    else:
        base = spec.priority_value()
    value = min(max(base - spec.nice, 0), INT32_MAX)
    if user.is_admin:
        return value
    if spec.nice < 0:
        raise Forbidden(
            f"nice {spec.nice} raises the job's priority: only an admin may give a negative nice",
            hint="give --nice 0 or more, or ask an admin",
        )
    if value > bound:
        asked = _asked(spec, base)
        shown = asked if spec.nice == 0 else f"{asked} (nice {spec.nice}: {value})"
        raise Forbidden(
            f"priority {shown} is above what queue {spec.queue!r} allows its members",
            hint=f"at most {priority_label(bound)}; ask an admin",
        )
    return value
