"""GPU-hours by user, queue and account over calendar periods: Slurm's ``sreport``.

What is summed is every attempt's GPUs times the part of its run inside the period: ended
attempts (a preempted attempt counts, as sreport counts a requeued job's earlier runs), from
their daily totals (``usage_days``) for whole days and from their pieces (``attempts``) for a
window's partial first and last day, and running jobs up to now. An *account* is the root of
the queue's tree (railyard's queues play Slurm's accounts; ``--account`` on a script is
ignored). Periods are calendar days, ISO weeks (from Monday) or months, in UTC, clipped to
the asked window; the share is of the cluster's GPU-hours in the period with today's GPU
count, as sreport reports against the cluster's current TRES count.

A plain user sees their own usage only (as Slurm with ``PrivateData=usage``); an admin sees
everyone's, or one user's.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from sqlalchemy import Float, and_, case, column, func, literal, select, values
from sqlalchemy.orm import Session

from railyard.client.wire import Report, UsageLine
from railyard.control.errors import Invalid
from railyard.control.store.tables import (
    HOLDING_STATES,
    AttemptRow,
    JobRow,
    NodeRow,
    QueueRow,
    UsageDayRow,
    User,
)
from railyard.control.store.usagedays import DAY_S, day_of
from railyard.control.usecases.history import busy_gpu_s
from railyard.control.usecases.queues import parent_map, path

__all__ = ["Report", "UsageLine", "gpu_hours", "nominal_gpus", "periods"]  # the wire's shapes

PERIODS = ("total", "day", "week", "month")
GROUPS = ("user", "queue", "account")
MAX_PERIODS = 400  # a year and more of days: beyond, ask for weeks or months


def periods(start_t_s: float, end_t_s: float, period: str) -> list[tuple[float, float]]:
    """The window cut at UTC calendar boundaries: ``[(start, end), ...]``, first and last
    clipped to the window."""
    if period not in PERIODS:
        raise Invalid("period", f"unknown period {period!r}", hint="one of " + ", ".join(PERIODS))
    if not end_t_s > start_t_s:
        raise Invalid("end", "the window is empty", hint="give an end after the start")
    if period == "total":
        return [(start_t_s, end_t_s)]
    cut = _floor(datetime.fromtimestamp(start_t_s, UTC), period)
    out: list[tuple[float, float]] = []
    while cut.timestamp() < end_t_s:
        after = _next(cut, period)
        out.append((max(start_t_s, cut.timestamp()), min(end_t_s, after.timestamp())))
        if len(out) > MAX_PERIODS:
            raise Invalid("period", f"more than {MAX_PERIODS} {period}s in the window",
                          hint="a longer period (week, month) or a shorter window")  # fmt: skip
        cut = after
    return out


def _floor(t: datetime, period: str) -> datetime:
    day = t.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "week":
        return day - timedelta(days=day.weekday())
    if period == "month":
        return day.replace(day=1)
    return day


def _next(t: datetime, period: str) -> datetime:
    if period == "day":
        return t + timedelta(days=1)
    if period == "week":
        return t + timedelta(days=7)
    return (t.replace(day=28) + timedelta(days=4)).replace(day=1)


def gpu_hours(
    session: Session,
    actor: User,
    start_t_s: float,
    end_t_s: float,
    now_t_s: float,
    *,
    period: str = "total",
    by: Sequence[str] = ("user",),
    user: str | None = None,
) -> Report:
    """Usage in ``[start_t_s, end_t_s)`` per period and per ``by`` group, largest first within
    a period; groups with no usage are left out."""
    wanted = tuple(dict.fromkeys(by))
    unknown = [b for b in wanted if b not in GROUPS]
    if unknown or not wanted:
        raise Invalid("by", f"cannot group by {','.join(unknown) or 'nothing'}",
                      hint="any of " + ", ".join(GROUPS))  # fmt: skip
    if not actor.is_admin:
        user = actor.name
    if start_t_s >= now_t_s:
        raise Invalid("start", "the window starts in the future", hint="a start before now")
    cuts = periods(start_t_s, min(end_t_s, max(now_t_s, start_t_s + 1e-9)), period)
    sums: dict[tuple[float, str | None, str | None, str | None], float] = {}
    parents = parent_map(session)
    for lo, user_name, queue, gpu_s in _rows(session, cuts, user, now_t_s):
        account = path(parents, queue)[0] if queue in parents else queue
        key = (
            lo,
            user_name if "user" in wanted else None,
            queue if "queue" in wanted else None,
            account if "account" in wanted else None,
        )
        sums[key] = sums.get(key, 0.0) + gpu_s
    gpus = int(session.scalar(select(func.coalesce(func.sum(NodeRow.gpus), 0))) or 0)
    bounds = dict(cuts)
    lines = [
        UsageLine(start_t_s=lo, end_t_s=bounds[lo], user=u, queue=q, account=a,
                  gpu_hours=gpu_s / 3600,
                  share=gpu_s / (gpus * (bounds[lo] - lo)) if gpus and bounds[lo] > lo else 0.0)
        for (lo, u, q, a), gpu_s in sums.items() if gpu_s > 0
    ]  # fmt: skip
    lines.sort(key=lambda line: (line["start_t_s"], -line["gpu_hours"], line["user"] or "",
                                 line["queue"] or "", line["account"] or ""))  # fmt: skip
    return Report(
        start_t_s=cuts[0][0],
        end_t_s=cuts[-1][1],
        period=period,
        by=list(wanted),
        cluster_gpus=gpus,
        lines=lines,
        periods=[[lo, hi] for lo, hi in cuts],
    )


def nominal_gpus(session: Session) -> dict[str, int]:
    """Each queue's nominal GPUs, all flavors together: its entitlement, against which the
    accounting page sets what it used."""
    rows = session.execute(select(QueueRow.name, QueueRow.nominal_gpus))
    return {name: sum(quota.values()) for name, quota in rows}


def _rows(
    session: Session, cuts: list[tuple[float, float]], user: str | None, now_t_s: float
) -> list[tuple[float, str, str, float]]:
    """(period start, user, queue, GPU-seconds): whole days from their totals, the window's
    partial first and last days from their attempts, running jobs up to now."""
    lo, hi = cuts[0][0], cuts[-1][1]
    starts = [c[0] for c in cuts]
    whole_from, whole_to = day_of(lo) + (DAY_S if lo > day_of(lo) else 0.0), day_of(hi)
    out: list[tuple[float, str, str, float]] = []
    d = UsageDayRow
    if whole_from < whole_to:
        buckets = values(column("lo", Float), column("hi", Float), name="periods").data(cuts)
        b = buckets.cte()
        days = (
            select(b.c.lo, d.user_name, d.queue, func.sum(d.gpu_s))
            .select_from(b)
            .join(d, and_(d.day_t_s >= b.c.lo, d.day_t_s < b.c.hi))
            .where(d.day_t_s >= whole_from, d.day_t_s < whole_to)
            .group_by(b.c.lo, d.user_name, d.queue)
        )
        if user is not None:
            days = days.where(d.user_name == user)
        out += [(float(p), str(u), str(q), float(g or 0.0)) for p, u, q, g in session.execute(days)]
    edges = {day for day in (day_of(lo), day_of(hi)) if not whole_from <= day < whole_to}
    edges = {day for day in edges if day < hi and day + DAY_S > lo}
    if edges:
        a = AttemptRow
        first = case((a.start_t_s > lo, a.start_t_s), else_=literal(lo))
        last = case((a.end_t_s < hi, a.end_t_s), else_=literal(hi))
        pieces = (
            select(a.day_t_s, a.user_name, a.queue, func.sum(a.gpus * (last - first)))
            .where(a.day_t_s.in_(sorted(edges)), a.end_t_s > lo, a.start_t_s < hi)
            .group_by(a.day_t_s, a.user_name, a.queue)
        )
        if user is not None:
            pieces = pieces.where(a.user_name == user)
        for day, u, q, g in session.execute(pieces):
            at = starts[bisect_right(starts, max(float(day), lo)) - 1]
            out.append((at, str(u), str(q), float(g or 0.0)))
    running = (
        select(User.name, JobRow.queue, JobRow.workers * JobRow.gpus_per_worker, JobRow.start_t_s)
        .join(User, User.id == JobRow.user_id)
        .where(JobRow.state.in_(HOLDING_STATES), JobRow.start_t_s < hi)
    )
    if user is not None:
        running = running.where(User.name == user)
    for u, q, gpus, began in session.execute(running):
        if began is None:
            continue
        run_lo, run_hi = max(float(began), lo), min(now_t_s, hi)
        i = max(0, bisect_right(starts, run_lo) - 1)
        while i < len(cuts) and cuts[i][0] < run_hi:
            overlap = min(run_hi, cuts[i][1]) - max(run_lo, cuts[i][0])
            if overlap > 0:
                out.append((cuts[i][0], str(u), str(q), gpus * overlap))
            i += 1
    return out


def daily_utilization(session: Session, days: int, now_t_s: float) -> list[tuple[float, float]]:
    """The whole cluster's busy GPU share per UTC day over the last ``days`` (today so far,
    over the part of it gone): GPUs held by jobs, from the same steps as the overview's
    utilization line (`usecases.history`), so today's bar and "now" measure one thing;
    totals only, so every viewer may see them."""
    cuts = periods(window_start_t_s(days, now_t_s), now_t_s, "day")
    gpus = int(session.scalar(select(func.coalesce(func.sum(NodeRow.gpus), 0))) or 0)
    held = busy_gpu_s(session, cuts, now_t_s)
    return [(lo, min(1.0, gpu_s / (gpus * (hi - lo))) if gpus and hi > lo else 0.0)
            for (lo, hi), gpu_s in zip(cuts, held, strict=True)]  # fmt: skip


def window_start_t_s(days: int, now_t_s: float) -> float:
    """Where "the last ``days`` days" begin: the UTC midnight ``days - 1`` days before today's
    (today counts as one), or for one day the last 24 hours."""
    return now_t_s - DAY_S if days <= 1 else day_of(now_t_s) - (days - 1) * DAY_S
