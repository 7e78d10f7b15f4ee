"""Declared partitions become queues (``blueprint.partitions``): applied at every start of
``railyard up``, as slurmctld reads slurm.conf's partition lines at every start.

A partition missing from the store is made below ``default``, with no quota of its own (its
jobs share ``default``'s) and open to every member of ``default``. A declared partition's time
limits, pool and default flag are the declaration's, at every start: an admin's change to
those through the API lasts until the next start, as an ``scontrol update`` of a partition
does. What a declaration does not say (weight, members, bounds) stays the admin's.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy.orm import Session

from railyard.blueprint.partitions import PARENT, Partition
from railyard.control.store.effects import record
from railyard.control.store.tables import QueueRow
from railyard.control.usecases.queues import one_default


def declare_partitions(
    session: Session, partitions: Mapping[str, Partition], now_t_s: float
) -> list[str]:
    """Make or align a queue per partition; returns what changed, one line each."""
    if not partitions:
        return []
    parent = PARENT if session.get(QueueRow, PARENT) is not None else None
    changed: list[str] = []
    for name, partition in partitions.items():
        row = session.get(QueueRow, name)
        made = row is None
        if row is None:
            row = QueueRow(name=name, parent=parent, nominal_gpus={}, created_t_s=now_t_s)
            session.add(row)
        wanted = {
            "default_time_s": partition.default_time_s,
            "max_time_s": partition.max_time_s,
            "pool": partition.pool,
            "is_default": partition.default,
        }
        diff = {key: value for key, value in wanted.items() if getattr(row, key) != value}
        for key, value in diff.items():
            setattr(row, key, value)
        if made:
            changed.append(f"partition {name} declared: a queue below {parent or 'no queue'}")
        elif diff:
            said = ", ".join(f"{key}={value}" for key, value in diff.items())
            changed.append(f"partition {name} set as declared: {said}")
    session.flush()
    default = next((name for name, p in partitions.items() if p.default), None)
    if default is not None:  # its siblings' flags, from an admin or an earlier start, go
        one_default(session, session.get_one(QueueRow, default))
    for line in changed:
        record(session, now_t_s, "queue", line, None)
    return changed
