"""The alerts: one rule set for the dashboard's alerts page, ``/healthz`` and ``/metrics``.

Each rule reads what ``/healthz`` judges by (`loopstatus.loop_status`: failed steps, a loop
behind, starts stalled, jobs stuck past their deadline, jobs held for a SchedulerError), the
nodes' states and the queues' quotas (`queueviews.overcommitted`), and each has the name of
the Prometheus alerting rule that fires on the same figures from ``/metrics``
(``examples/grafana/railyard-alerts.yml``; a test checks the two name the same alerts), so
the page, a scrape and a pager agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from railyard.control.store.tables import NodeRow, User
from railyard.control.usecases.loopstatus import LoopHealth, loop_status
from railyard.control.usecases.overview import loop_report
from railyard.control.usecases.queueviews import overcommitted


@dataclass(frozen=True)
class Alert:
    name: str  # as the Prometheus rule names it
    severity: str  # "critical" pages someone; "warning" waits for working hours
    firing: bool
    summary: str  # what the rule watches
    details: tuple[str, ...] = ()  # why it fires now, in lines this viewer may read


RULES = {  # name -> (severity, what it watches)
    "RailyardLoopUnhealthy": ("critical", "the scheduler loop's steps fail, or no job started "
                              "while some could (/healthz answers 503)"),
    "RailyardLoopBehind": ("critical", "no loop step ended for longer than it may take"),
    "RailyardJobsStuck": ("warning", "jobs in a transient state past their deadline"),
    "RailyardJobsHeldBySchedulerError": ("warning", "jobs the loop could not handle, held "
                                         "until an admin releases them"),
    "RailyardNodesDown": ("critical", "nodes down"),
    "RailyardNodesDraining": ("warning", "nodes draining or drained"),
    "RailyardQuotaOvercommitted": ("warning", "the leaf queues' nominal quotas sum to more "
                                   "GPUs than the cluster has"),
}  # fmt: skip


def alerts(session: Session, health: LoopHealth | None, actor: User, now_t_s: float
           ) -> list[Alert]:  # fmt: skip
    """Every rule, firing or not, firing first."""
    found: dict[str, tuple[str, ...]] = {}
    if health is not None:
        status = loop_status(session, health, now_t_s)
        shown = loop_report(session, health, actor, now_t_s)
        lines = shown.lines if shown is not None else ()
        own = tuple(health.problems(now_t_s))
        behind = tuple(p for p in own if ": behind:" in p)
        found["RailyardLoopBehind"] = behind
        found["RailyardLoopUnhealthy"] = tuple(p for p in own if p not in behind)
        found["RailyardJobsStuck"] = (
            tuple(p for p in lines if p not in own) if status.stuck.total else ()
        )
        held = status.held[0]
        note = (
            status.note()
            if actor.is_admin
            # ids for an admin only
            else (f"{held} job(s) held for a SchedulerError" if held else None)
        )
        found["RailyardJobsHeldBySchedulerError"] = (note,) if note else ()
    by_state = dict(
        session.execute(select(NodeRow.state, func.count()).group_by(NodeRow.state)).all()
    )
    down = int(by_state.get("down", 0))
    draining = int(by_state.get("draining", 0)) + int(by_state.get("drained", 0))
    found["RailyardNodesDown"] = (f"{down} node(s) down",) if down else ()
    found["RailyardNodesDraining"] = (
        (f"{draining} node(s) draining or drained",) if draining else ()
    )
    found["RailyardQuotaOvercommitted"] = tuple(
        f"{o.flavor}: {o.nominal_gpus:,} nominal on {o.cluster_gpus:,} GPUs"
        for o in overcommitted(session)
    )
    out = [
        Alert(name, severity, bool(found.get(name)), summary, found.get(name, ()))
        for name, (severity, summary) in RULES.items()
        if name in found
    ]
    return sorted(out, key=lambda a: (not a.firing, a.severity != "critical", a.name))
