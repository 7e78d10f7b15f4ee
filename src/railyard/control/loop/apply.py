"""A lifecycle `StepPlan` written to the store, before anything is done about it.

Every state change is a compare-and-set on the row (`UPDATE ... WHERE id = :id AND state =
:seen`): the API may have changed a row since the step read it (a cancel, a hold), and then
the plan's change for that row is dropped and the next step decides again. What the loop
must then do (launch, signal) is returned, only for the changes that were written.

A settlement that raises before its statement ran (the loop's own error, not the store's) is
that job's alone: it is named in ``Written.broken`` and the rest of the plan is written; the
loop ends the job with a ``SchedulerError`` reason after the commit. An error of the store
is the step's: it rolls the whole plan back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import ARRAY, String, Table, any_, bindparam, case, select, update
from sqlalchemy import text as sql_text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import InstrumentedAttribute, Session
from sqlalchemy.sql.elements import ColumnElement

from railyard.control.loop.world import Seen
from railyard.control.store.convert import usage_keys
from railyard.control.store.effects import record, record_many
from railyard.control.store.jobchanges import numbered
from railyard.control.store.tables import HOLD_REASONS, JobRow, JobState, NodeRow, UsageRow
from railyard.control.store.transitions import changed_rows
from railyard.control.store.usagedays import Ended, record_attempts
from railyard.control.usecases.loopstatus import SCHEDULER_ERROR
from railyard.control.usecases.placements import placement_text
from railyard.sched import NodeState, RunningJob, StopCause, Usage
from railyard.sched.applyplan import apply_plan
from railyard.sched.decisions import Reason, Start
from railyard.sched.lifecycle import Settlement, StepPlan
from railyard.sched.stops import Stop

REASON_CHUNK = 5000  # ids one reason UPDATE sends (SQLite allows 32,766 variables)


@dataclass
class Written:
    """The changes that reached the store, for the loop to act on."""

    started: list[str] = field(default_factory=list)
    preempted: list[tuple[str, float]] = field(default_factory=list)  # (job, grace_s)
    stopped: list[str] = field(default_factory=list)  # cancel now: node down, time limit
    timed_out: list[str] = field(default_factory=list)  # of those, the time limit's
    warned: list[str] = field(default_factory=list)
    finished: list[tuple[str, str]] = field(default_factory=list)  # (job, end state)
    requeued: list[str] = field(default_factory=list)
    unsettled: list[str] = field(default_factory=list)  # changed since read: settle again
    reasons: dict[str, str] = field(default_factory=dict)  # pending job -> reason written
    attempts: list[Ended] = field(default_factory=list)  # ended runs, for accounting
    broken: dict[str, BaseException] = field(default_factory=dict)  # settling it raised


def cas(
    session: Session,
    job_id: str,
    expected: str | tuple[str, ...],
    *also: ColumnElement[bool],
    **values: Any,
) -> bool:
    """Set `values` on the job if its state is still `expected` (and the conditions ``also``
    hold); True if it was."""
    states = (expected,) if isinstance(expected, str) else expected
    stmt = (
        update(JobRow)
        .where(JobRow.id == job_id, JobRow.state.in_(states), *also)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    return changed_rows(session, stmt) == 1


def write_plan(session: Session, plan: StepPlan, seen: Seen, now_t_s: float) -> Written:
    """Write ``plan`` in the drivers' one order (`sched.applyplan`), then the accounting rows
    of the attempts it ended and the pending jobs' changed reasons."""
    out = Written()
    apply_plan(plan, _StoreTarget(session, seen, now_t_s, out))
    record_attempts(session, out.attempts)
    out.reasons = _reasons(session, plan, seen, now_t_s)
    return out


@dataclass
class _StoreTarget:
    """The store as `sched.applyplan` changes it: each change a compare-and-set on the row
    the step read, noted in ``out`` when it was written."""

    session: Session
    seen: Seen
    now_t_s: float
    out: Written

    @property
    def nominated(self) -> set[str]:
        return self.seen.nominated

    def settle(self, s: Settlement) -> None:
        run = self.seen.running.get(s.job_id)
        try:
            written = _settle(self.session, s, self.seen.states.get(s.job_id), self.now_t_s,
                              self.out)  # fmt: skip
            if written and run is not None:
                _ended_attempt(s, run, self.now_t_s, self.out)
        except SQLAlchemyError:  # the store's: the step's
            raise
        except Exception as exc:  # this job's: the others are settled
            self.out.broken[s.job_id] = exc

    def expire(self, job_id: str) -> None:
        _expire(self.session, job_id, self.now_t_s, self.out)

    def abandon(self, job_id: str) -> None:
        _abandon(self.session, job_id, self.now_t_s, self.out)

    def satisfy(self, job_id: str) -> None:
        """Still pending, and still the dependency the step found met (an `update
        --dependency` since then stands); it was eligible, so any --begin has passed and
        `met_now`'s `begins_again_t_s` is now."""
        met = self.seen.dependencies.get(job_id)
        values = {"dependency": None, "met_dependency": met, "begin_t_s": self.now_t_s,
                  "updated_t_s": self.now_t_s}  # fmt: skip
        cas(self.session, job_id, JobState.PENDING.value, JobRow.dependency == met, **values)

    def warn(self, job_id: str) -> None:
        now = self.now_t_s
        if cas(self.session, job_id, JobState.RUNNING.value, warned=True, updated_t_s=now):
            record(self.session, now, "warn", "time limit warning signal", job_id)
            self.out.warned.append(job_id)

    def stop(self, stop: Stop) -> None:
        _stop(self.session, stop, self.now_t_s, self.out)

    def start(self, starts: Sequence[Start]) -> set[str]:
        started = _start_all(self.session, starts, self.seen, self.now_t_s)
        self.out.started.extend(started)
        return set(started)

    def nominate(self, job_id: str, nominated: bool) -> None:
        cas(self.session, job_id, JobState.PENDING.value, nominated=nominated,
            updated_t_s=self.now_t_s)  # fmt: skip

    def drain(self, node: str) -> None:
        stmt = (
            update(NodeRow)
            .where(NodeRow.name == node, NodeRow.state == NodeState.DRAINING.value)
            .values(state=NodeState.DRAINED.value, updated_t_s=self.now_t_s)
        )
        if changed_rows(self.session, stmt):
            record(self.session, self.now_t_s, "drained", f"node {node} drained", None)

    def accrue(self, usage: Usage) -> None:
        _usage(self.session, usage, self.now_t_s)


def _ended_attempt(s: Settlement, run: RunningJob, now_t_s: float, out: Written) -> None:
    """The accounting row of the attempt a settlement ended: its GPUs from its start (an
    image pull included: the GPUs were held) to its exit."""
    ended = s.exit
    assert ended is not None
    end_t_s = ended.t_s if ended.t_s is not None else now_t_s
    state = "requeue" if s.requeued is not None else (s.end.value if s.end else "ended")
    out.attempts.append(Ended(s.job_id, ended.restart_count, run.job.user, run.job.queue,
                              run.gpus, run.start_t_s, end_t_s, state))  # fmt: skip


def _expire(session: Session, job_id: str, now_t_s: float, out: Written) -> None:
    """A pending job that could no longer end by its deadline ends DEADLINE (Slurm's state
    and reason)."""
    message = "it could no longer end by its deadline: not started"
    _end_unstarted(session, job_id, now_t_s, out, JobState.DEADLINE, "DeadLine", message)


def _abandon(session: Session, job_id: str, now_t_s: float, out: Written) -> None:
    """A pending job whose dependency can never be met, submitted with
    --kill-on-invalid-dep=yes, ends CANCELLED (Slurm's kill_invalid_depend)."""
    message = "its dependency can never be met (--kill-on-invalid-dep): not started"
    _end_unstarted(
        session, job_id, now_t_s, out, JobState.CANCELLED, "DependencyNeverSatisfied", message
    )


def _end_unstarted(
    session: Session,
    job_id: str,
    now_t_s: float,
    out: Written,
    state: JobState,
    reason: str,
    message: str,
) -> None:
    """End a pending job without starting it, unless its row moved since the read (an
    update, a start: the next step judges it again)."""
    ended = cas(
        session,
        job_id,
        JobState.PENDING.value,
        state=state.value,
        reason=reason,
        nominated=False,
        end_t_s=now_t_s,
        updated_t_s=now_t_s,
    )
    if ended:
        record(session, now_t_s, state.value, message, job_id)
        out.finished.append((job_id, state.value))


def _settle(
    session: Session, s: Settlement, seen_state: str | None, now_t_s: float, out: Written
) -> bool:
    """Compare-and-set on the state the step decided from: a settlement made for a running
    job must not land on one that was cancelled since (a requeue would revive it); the next
    step settles the exit again, from the new state. True: written."""
    ended = s.exit
    assert ended is not None  # the lifecycle settles exits only
    if seen_state is None:
        out.unsettled.append(s.job_id)
        return False
    expected = JobRow.restart_count == ended.restart_count
    if s.requeued is not None:
        stmt = (
            update(JobRow)
            .where(JobRow.id == s.job_id, JobRow.state == seen_state, expected)
            .values(
                state=JobState.PENDING.value,
                restart_count=s.requeued.restart_count,
                attained_gpu_s=s.requeued.attained_gpu_s,
                # scontrol requeuehold set a hold with the stop: it comes back held, saying so
                reason=case(
                    *((JobRow.hold == kind, why) for kind, why in HOLD_REASONS.items()),
                    else_=s.reason,
                ),
                placement=None,
                handle=None,
                start_t_s=None,
                preempt_for=None,
                preempt_deadline_t_s=None,
                stop_cause=None,
                last_checkpoint_t_s=None,
                warned=False,
                nominated=False,
                updated_t_s=now_t_s,
            )
            .execution_options(synchronize_session=False)
        )
        if changed_rows(session, stmt):
            message = f"{s.reason}; restart {s.requeued.restart_count}"
            record(session, now_t_s, "requeue", message, s.job_id)
            out.requeued.append(s.job_id)
            return True
        out.unsettled.append(s.job_id)
        return False
    assert s.end is not None
    stmt = (
        update(JobRow)
        .where(JobRow.id == s.job_id, JobRow.state == seen_state, expected)
        .values(
            state=s.end.value,
            reason=s.reason,
            exit_code=ended.exit_code,
            exit_signal=ended.signal,
            outcome=ended.kind.value,
            end_t_s=ended.t_s if ended.t_s is not None else now_t_s,
            updated_t_s=now_t_s,
        )
        .execution_options(synchronize_session=False)
    )
    if changed_rows(session, stmt):
        message = f"{s.reason}; " + (
            f"signal {ended.signal}" if ended.signal else f"exit {ended.exit_code}"
        )
        record(session, now_t_s, s.end.value, message, s.job_id)
        out.finished.append((s.job_id, s.end.value))
        return True
    out.unsettled.append(s.job_id)
    return False


# the audit event of each stop: (kind, message; None: the stop's reason)
_STOP_EVENTS = {
    StopCause.TIME_LIMIT: ("time_limit", "time limit reached: stopping"),
    StopCause.IDLE_LIMIT: ("idle_limit", "idle limit reached (nothing sent to it): stopping"),
    StopCause.PREEMPTED: ("preempt", None),
    StopCause.NODE_DOWN: ("requeue", None),
    StopCause.REQUEUED: ("requeue", None),
}


IMAGES_KEPT = 32
"""Images remembered per node (the oldest forgotten first): a hint for placement, not a
promise that the node still has them."""


def _remember_images(session: Session, arriving: Mapping[str, list[str]]) -> None:
    """The nodes of a step's starts will hold their images (node -> images, in start order):
    later jobs of those images prefer them. One read of those nodes for the whole step."""
    if not arriving:
        return
    for row in session.scalars(select(NodeRow).where(NodeRow.name.in_(sorted(arriving)))):
        held = list(row.images or ())
        new = [i for i in dict.fromkeys(arriving[row.name]) if i not in held]
        if new:
            row.images = [*held, *new][-IMAGES_KEPT:]


def write_ready(
    session: Session, ready: Mapping[str, tuple[int, float]], now_t_s: float
) -> list[str]:
    """Record when each container job's image was ready on all its nodes (its time limit
    runs from then); returns the jobs written now. Once per attempt: a job already written,
    or in another attempt, is left alone."""
    written = []
    started = (JobState.STARTING.value, JobState.RUNNING.value, JobState.PREEMPTING.value,
               JobState.CANCELLING.value)  # fmt: skip
    for job_id, (restart_count, ready_t_s) in ready.items():
        done = session.execute(
            update(JobRow)
            .where(JobRow.id == job_id, JobRow.restart_count == restart_count,
                   JobRow.run_t_s.is_(None), JobRow.state.in_(started))
            .values(run_t_s=ready_t_s, updated_t_s=now_t_s)
            .returning(JobRow.start_t_s)
        ).first()  # fmt: skip
        if done is None:
            continue
        took = f" after {max(0.0, ready_t_s - done[0]):.1f} s" if done[0] is not None else ""
        record(session, now_t_s, "running", f"image ready{took}; running", job_id)
        written.append(job_id)
    return written


def _stop(session: Session, stop: Stop, now_t_s: float, out: Written) -> None:
    """Persist a step's stop on a job still started; a requeueing stop is PREEMPTING (with
    its deadline), any other CANCELLING."""
    values: dict[str, Any] = {"stop_cause": stop.cause.value}
    if stop.requeues:
        values.update(
            state=JobState.PREEMPTING.value,
            preempt_for=stop.preempt_for,
            preempt_deadline_t_s=now_t_s + stop.grace_s,
        )
    else:
        values.update(state=JobState.CANCELLING.value)
    started = (JobState.RUNNING.value, JobState.STARTING.value)
    if not cas(session, stop.job_id, started, reason=stop.reason, updated_t_s=now_t_s, **values):
        return
    kind, message = _STOP_EVENTS[stop.cause]
    record(session, now_t_s, kind, message or stop.reason, stop.job_id)
    if stop.handshake:
        out.preempted.append((stop.job_id, stop.grace_s))
    else:
        out.stopped.append(stop.job_id)
        if stop.cause is StopCause.TIME_LIMIT:
            out.timed_out.append(stop.job_id)


def _start_all(session: Session, starts: Sequence[Start], seen: Seen, now_t_s: float) -> list[str]:
    """Write the step's starts, each a compare-and-set PENDING -> STARTING that only applies
    while the job is unheld and every node of its placement ready (a hold or a drain since
    the read wins the race); returns the jobs started, in the plan's order.

    One statement for all (an executemany), after one read of which of their nodes are
    closed: a thousand starts were a thousand round trips, most of a first plan's second."""
    placements = {s.job_id: {node: list(g) for node, g in s.placement.items()} for s in starts}
    nodes = {node for placement in placements.values() for node in placement}
    closed = set(session.scalars(select(NodeRow.name).where(
        NodeRow.name.in_(sorted(nodes)), NodeRow.state != NodeState.READY.value)))  # fmt: skip
    wanted = [s for s in starts if closed.isdisjoint(placements[s.job_id])]
    if not wanted:
        return []
    reasons = {s.job_id: s.reason.value + (" (borrowing)" if s.borrowing else "") for s in wanted}
    jobs = cast(Table, JobRow.__table__)  # Core: one statement for many parameter sets
    stmt = (
        update(jobs)
        .where(jobs.c.id == bindparam("b_id"), jobs.c.state == JobState.PENDING.value,
               jobs.c.hold.is_(None))
        .values(**numbered(session, dict(
            state=JobState.STARTING.value, placement=bindparam("b_placement"),
            start_t_s=now_t_s, run_t_s=None, reason=bindparam("b_reason"),
            nominated=False, updated_t_s=now_t_s)))
    )  # fmt: skip
    params = [{"b_id": s.job_id, "b_placement": placements[s.job_id], "b_reason": reasons[s.job_id]}
              for s in wanted]  # fmt: skip
    ids = [s.job_id for s in wanted]
    if changed_rows(session, stmt, params) == len(params):
        applied = set(ids)
    else:  # some lost a race: the rows this step moved are STARTING at this instant
        applied = set()
        for chunk in range(0, len(ids), REASON_CHUNK):
            applied.update(session.scalars(select(JobRow.id).where(
                JobRow.id.in_(ids[chunk : chunk + REASON_CHUNK]),
                JobRow.state == JobState.STARTING.value, JobRow.start_t_s == now_t_s)))  # fmt: skip
    started = [i for i in ids if i in applied]
    events = [("start", f"{reasons[i]} on {placement_text(placements[i])}", i) for i in started]
    arriving: dict[str, list[str]] = {}
    for job_id in started:
        image = seen.images.get(job_id)
        if image is not None:
            message = f"pulling image {image} where missing; the time limit starts after"
            events.append(("pulling", message, job_id))
            for node in placements[job_id]:
                arriving.setdefault(node, []).append(image)
    record_many(session, now_t_s, events)
    _remember_images(session, arriving)
    return started


def _reasons(session: Session, plan: StepPlan, seen: Seen, now_t_s: float) -> dict[str, str]:
    """Changed reasons of pending jobs, one UPDATE per distinct reason (and 5,000 jobs).

    A reason is what the loop says of a row, not a change to the job: it sets ``reason`` alone,
    which the store does not count as a change (``jobs.change_seq``, migration 0028), so the
    loop's reader (`control.world`) reads none of these rows again when a cycle turns ten
    thousand reasons at once. Returns the reasons written, for that reader."""
    stored = seen.reasons.get
    changed: dict[str, list[str]] = {}
    # ten thousand reasons a step and a few changed: filtered in a comprehension, a reason
    # compared as the str it is (2.6 -> 0.8-1.3 ms a step than a loop reading `.value`)
    for job_id, reason in [
        (job_id, reason)
        for job_id, reason in plan.reasons.items()
        if (was := stored(job_id)) is not None and was != reason and not _kept(was, reason)
    ]:
        changed.setdefault(reason.value, []).append(job_id)
    written: dict[str, str] = {}
    sqlite = session.get_bind().dialect.name == "sqlite"
    if changed and not sqlite:
        # Plan these for their ids: psycopg prepares a statement after its fifth run, and
        # PostgreSQL may then keep one generic plan for it, here an index probe per id in
        # place of a scan of the pending rows: 35 -> 480 ms a chunk of 5,000 (bench_live).
        session.execute(sql_text("SET LOCAL plan_cache_mode = force_custom_plan"))
    for text, ids in changed.items():
        for chunk in range(0, len(ids), REASON_CHUNK):
            session.execute(
                update(JobRow)
                .where(
                    one_of(JobRow.id, ids[chunk : chunk + REASON_CHUNK], sqlite=sqlite),
                    JobRow.state == JobState.PENDING.value,
                )
                .values(reason=text)
                .execution_options(synchronize_session=False)
            )
        written.update(dict.fromkeys(ids, text))
    return written


def _kept(stored: str, reason: Reason) -> bool:
    """A job the loop held for its own error keeps that reason while it stays held."""
    return reason is Reason.JOB_HELD_ADMIN and stored.startswith(SCHEDULER_ERROR)


def one_of(
    column: InstrumentedAttribute[str], values: list[str], *, sqlite: bool
) -> ColumnElement[bool]:
    """``column IN values``; on PostgreSQL ``column = ANY(:values)``, the values bound as one
    array: an ``IN`` of 5,000 bound values cost 0.2 s of the loop's CPU per 10,000 reasons
    there (SQLAlchemy expands and the driver sends each one), with the rows locked meanwhile.
    SQLite has no arrays; its ``IN`` costs a quarter of that."""
    if sqlite:
        return column.in_(values)
    return column == any_(bindparam("ids", values, type_=ARRAY(String)))


def _usage(session: Session, usage: Usage, now_t_s: float) -> None:
    existing: Mapping[str, UsageRow] = {r.key: r for r in session.scalars(select(UsageRow))}
    for key, gpu_s in usage_keys(usage).items():
        row = existing.get(key)
        if row is None:
            session.add(UsageRow(key=key, gpu_s=gpu_s, updated_t_s=now_t_s))
        elif row.gpu_s != gpu_s:
            row.gpu_s = gpu_s
            row.updated_t_s = now_t_s
