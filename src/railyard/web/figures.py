"""What the pages show, read from the store in a few aggregate queries (a page must answer
in milliseconds with 10,000 jobs in the store: nothing here loads every job)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from railyard.control.tables import HOLDING_STATES, JobRow, JobState, NodeRow

HISTORY_S = 6 * 3600.0
BUCKETS = 36  # ten minutes each


@dataclass(frozen=True)
class FlavorGpus:
    flavor: str
    total: int
    in_use: int
    draining: int  # on draining or drained nodes, not in use
    down: int

    @property
    def free(self) -> int:
        return max(0, self.total - self.in_use - self.draining - self.down)


def gpus_by_flavor(session: Session) -> list[FlavorGpus]:
    nodes = session.execute(select(NodeRow.name, NodeRow.flavor, NodeRow.gpus, NodeRow.state))
    flavor_of, state_of = {}, {}
    total: Counter[str] = Counter()
    for name, flavor, gpus, state in nodes:
        flavor_of[name], state_of[name] = flavor, state
        total[flavor] += gpus
    used: Counter[str] = Counter()
    used_on: Counter[str] = Counter()
    for (placement,) in session.execute(
        select(JobRow.placement).where(JobRow.state.in_(HOLDING_STATES))
    ):
        for node, held in (placement or {}).items():
            used[flavor_of.get(node, "?")] += len(held)
            used_on[node] += len(held)
    draining: Counter[str] = Counter()
    down: Counter[str] = Counter()
    gpus_of = {name: gpus for name, gpus in session.execute(select(NodeRow.name, NodeRow.gpus))}
    for name, state in state_of.items():
        idle = gpus_of[name] - used_on[name]
        if state in ("draining", "drained"):
            draining[flavor_of[name]] += idle
        elif state == "down":
            down[flavor_of[name]] += idle
    return [FlavorGpus(f, total[f], used[f], draining[f], down[f]) for f in sorted(total)]


def pending_by_reason(session: Session, user_id: int | None) -> list[tuple[str, int]]:
    stmt = select(JobRow.reason, func.count()).where(JobRow.state == JobState.PENDING.value)
    if user_id is not None:
        stmt = stmt.where(JobRow.user_id == user_id)
    counts: Counter[str] = Counter()
    for reason, count in session.execute(stmt.group_by(JobRow.reason)):
        counts[(reason or "None").split(" (")[0]] += int(count)
    return counts.most_common()


def history(session: Session, now_t_s: float, total_gpus: int) -> tuple[list[float], list[float]]:
    """GPU utilization and pending jobs over the last six hours, one point per ten minutes,
    rebuilt from the jobs' submit, start and end times (the store keeps no samples)."""
    since = now_t_s - HISTORY_S
    rows = session.execute(
        select(JobRow.submit_t_s, JobRow.start_t_s, JobRow.end_t_s, JobRow.workers,
               JobRow.gpus_per_worker)
        .where(JobRow.submit_t_s <= now_t_s)
        .where(or_(JobRow.end_t_s.is_(None), JobRow.end_t_s >= since))
    ).all()  # fmt: skip
    edges = np.linspace(since, now_t_s, BUCKETS + 1)[1:]
    if not rows:
        return [0.0] * BUCKETS, [0.0] * BUCKETS
    data = np.array([(s, st if st is not None else np.inf, e if e is not None else np.inf,
                      w * g) for s, st, e, w, g in rows], dtype=float)  # fmt: skip
    submit, start, end, gpus = data.T
    at = edges[:, None]
    running = (start <= at) & (at < end)
    pending = (submit <= at) & (at < np.minimum(start, end))
    busy = (running * gpus).sum(axis=1)
    util = (busy / total_gpus).tolist() if total_gpus else [0.0] * BUCKETS
    return [min(1.0, u) for u in util], pending.sum(axis=1).astype(float).tolist()


def sparkline(values: list[float], *, label: str, percent: bool = False) -> str:
    """An inline SVG line of `values` (oldest first) with its last value."""
    width, height = 360, 60
    top = max(values) if values and max(values) > 0 else 1.0
    if percent:
        top = 1.0
    step = width / max(1, len(values) - 1)
    points = " ".join(f"{i * step:.1f},{height - v / top * (height - 4) - 2:.1f}"
                      for i, v in enumerate(values))  # fmt: skip
    last = values[-1] if values else 0.0
    shown = f"{last:.0%}" if percent else f"{last:.0f}"
    return (
        f"<figure><figcaption>{label}: now {shown} (last 6 h)</figcaption>"
        f'<svg width="{width}" height="{height}" role="img" aria-label="{label}">'
        f'<rect width="{width}" height="{height}" fill="#fff" stroke="#ccc"/>'
        f'<polyline fill="none" stroke="#1d3557" stroke-width="2" points="{points}"/></svg>'
        "</figure>"
    )


def placements(session: Session) -> dict[str, dict[int, tuple[str, int]]]:
    """node -> GPU index -> (job id, owner's user id), for every job holding GPUs."""
    out: dict[str, dict[int, tuple[str, int]]] = defaultdict(dict)
    rows = session.execute(
        select(JobRow.id, JobRow.user_id, JobRow.placement).where(JobRow.state.in_(HOLDING_STATES))
    )
    for job_id, user_id, placement in rows:
        for node, gpus in (placement or {}).items():
            for g in gpus:
                out[node][g] = (job_id, user_id)
    return out
