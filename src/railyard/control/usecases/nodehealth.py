"""Node health use-cases: store a run of a node's checks, apply the health rule, read history.

The rule itself is :mod:`railyard.sched.health` (the simulator applies the same one); this
module stores the run, turns its results into one verdict and writes the node's new state as a
compare-and-set on the state and reason it read, so an admin's drain that lands in between is
never overwritten.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from railyard.control.errors import Conflict, NotFound
from railyard.control.health_schemas import (
    HealthReportOut,
    HealthResultIn,
    HealthResultOut,
    HealthRunOut,
    Status,
)
from railyard.control.store.effects import record, request_wake
from railyard.control.store.tables import HOLDING_STATES, HealthRow, JobRow, NodeRow, User
from railyard.control.usecases.users import require_admin
from railyard.health.result import VERSIONS, Result
from railyard.health.result import Status as Verdict
from railyard.sched.health import Finding, on_finding, worst
from railyard.sched.model import NodeState


def finding(row: HealthRow | HealthResultIn) -> Finding | None:
    """A result's finding (None: skipped, nothing judged)."""
    if row.fatal:
        return Finding.FATAL
    return None if row.status == "skip" else Finding(row.status)


def _against_others(session: Session, name: str, result: HealthResultIn) -> HealthResultIn:
    """A node's driver and CUDA versions (``gpu-versions``) fail when most other nodes run
    other ones (each node's last report): NCCL wants one driver across a job's nodes, and an
    odd node out is the one to upgrade. A tie warns: there is no majority to follow."""
    if result.check != VERSIONS or result.status != "pass" or not result.detail:
        return result
    latest = (
        select(HealthRow.node, func.max(HealthRow.id).label("id"))
        .where(HealthRow.check == VERSIONS, HealthRow.status != "skip", HealthRow.node != name)
        .group_by(HealthRow.node)
        .subquery()
    )
    found = session.scalars(select(HealthRow.detail).join(latest, HealthRow.id == latest.c.id))
    others = Counter(detail.split(";")[0] for detail in found)  # without an earlier note
    if not others:
        return result
    common, count = others.most_common(1)[0]
    same = others.get(result.detail, 0) + 1  # nodes on this node's versions, itself included
    if common == result.detail or same > count:
        return result
    status: Status = "warn" if same == count else "fail"
    note = f"{result.detail}; {count} of {others.total()} other nodes run {common}"
    return result.model_copy(update={"status": status, "detail": note[:500]})


def _reason(row: HealthResultIn) -> str:
    return Result(
        row.check, "", Verdict(row.status), row.measured, row.expected, row.unit,
        row.fail_below, row.warn_below, row.source, row.detail,
    ).reason()  # fmt: skip


def report(
    session: Session,
    actor: User,
    name: str,
    results: Sequence[HealthResultIn],
    now_t_s: float,
    *,
    fail_requeues: bool = False,
) -> HealthReportOut:
    """Store a run and apply the health rule to the node (admins: it can drain the node)."""
    require_admin(actor)
    return apply_run(session, name, results, now_t_s, actor.name, fail_requeues=fail_requeues)


def apply_run(
    session: Session,
    name: str,
    results: Sequence[HealthResultIn],
    now_t_s: float,
    reporter: str,
    *,
    fail_requeues: bool = False,
) -> HealthReportOut:
    """Store a run (`reporter`: who ran it) and apply the health rule to the node."""
    node = session.get(NodeRow, name)
    if node is None:
        raise NotFound(f"no node {name!r}", hint="`railyard nodes` lists them; give --node NAME")
    results = [_against_others(session, name, r) for r in results]
    run_id = uuid.uuid4().hex[:16]
    rows = [
        HealthRow(run_id=run_id, node=name, t_s=now_t_s, reporter=reporter, **r.model_dump())
        for r in results
    ]
    session.add_all(rows)
    found = [(f, r) for r in results if (f := finding(r)) is not None]
    verdict = worst([f for f, _ in found])
    state, reason = NodeState(node.state), node.reason
    action = f"{name} {state.value}: nothing was judged (every check skipped)"
    if verdict is not None:
        why = next((_reason(r) for f, r in found if f is verdict), "")
        change = on_finding(name, state, reason, verdict, why, fail_requeues=fail_requeues)
        if change is None:
            action = _unchanged(name, state, reason, verdict)
        else:
            _set_node(session, node, change.state.value, change.reason, now_t_s)
            action = _describe(session, name, state, change.state, change.reason)
            record(session, now_t_s, change.state.value, f"health: node {name} {action}", None)
            request_wake(session)
            state, reason = change.state, change.reason
    session.execute(
        update(NodeRow)
        .where(NodeRow.name == name)
        .values(health=verdict.value if verdict else "skip", health_t_s=now_t_s)
    )
    run = _run_out(run_id, name, now_t_s, reporter, rows)
    return HealthReportOut(run=run, state=state, reason=reason, action=action)


def _set_node(session: Session, node: NodeRow, state: str, reason: str, now_t_s: float) -> None:
    done = session.execute(
        update(NodeRow)
        .where(NodeRow.name == node.name)
        .where(NodeRow.state == node.state, NodeRow.reason == node.reason)
        .values(state=state, reason=reason, updated_t_s=now_t_s)
        .execution_options(synchronize_session=False)
    )
    if getattr(done, "rowcount", 1) != 1:
        raise Conflict(
            f"node {node.name!r} changed while its health run was applied",
            hint="report the run again",
        )


def _unchanged(name: str, state: NodeState, reason: str, verdict: Finding) -> str:
    if verdict in (Finding.PASS, Finding.WARN) or not reason:
        return f"{name} left {state.value}"
    return f"{name} left {state.value} ({reason}; not health's to change)"


def _describe(session: Session, name: str, before: NodeState, after: NodeState, reason: str) -> str:
    if after is NodeState.READY:
        return f"{name} resumed: no check failed"
    if after is NodeState.DOWN:
        jobs = [
            p for p in session.scalars(select(JobRow.placement).where(
                JobRow.state.in_(HOLDING_STATES)))
            if name in (p or {})
        ]  # fmt: skip
        requeued = f"; {len(jobs)} job(s) on it requeued" if jobs else ""
        return f"{name} down: {reason}{requeued}"
    word = "drained" if after is NodeState.DRAINED else "draining"
    return f"{name} {word}: {reason}"


def history(session: Session, name: str, limit: int) -> list[HealthRunOut]:
    """The node's last `limit` runs, newest first (any user: no tenant's data is in them)."""
    if session.get(NodeRow, name) is None:
        raise NotFound(f"no node {name!r}", hint="`railyard nodes` lists them")
    runs: list[list[HealthRow]] = []
    seen: dict[str, list[HealthRow]] = {}
    query = (
        select(HealthRow).where(HealthRow.node == name).order_by(HealthRow.t_s.desc(), HealthRow.id)
    )
    for row in session.scalars(query.execution_options(yield_per=256)):
        if row.run_id not in seen:
            if len(runs) == limit:
                break
            seen[row.run_id] = []
            runs.append(seen[row.run_id])
        seen[row.run_id].append(row)
    return [_run_out(r[0].run_id, name, r[0].t_s, r[0].reporter, r) for r in runs]


def _run_out(
    run_id: str, node: str, t_s: float, reporter: str, rows: Sequence[HealthRow]
) -> HealthRunOut:
    verdict = worst([f for r in rows if (f := finding(r)) is not None])
    return HealthRunOut(
        run_id=run_id,
        node=node,
        t_s=t_s,
        verdict=verdict.value if verdict else None,
        reporter=reporter,
        results=[
            HealthResultOut(
                check=r.check, status=r.status, fatal=bool(r.fatal), measured=r.measured,
                expected=r.expected, unit=r.unit,
                ratio=(r.measured / r.expected) if r.measured is not None and r.expected
                else None,
                fail_below=r.fail_below, warn_below=r.warn_below, source=r.source,
                detail=r.detail,
            )
            for r in rows
        ],
    )  # fmt: skip
