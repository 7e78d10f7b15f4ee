"""Routes of jobs: submit (one, an array, a batch), list, show, cancel, hold, release, logs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlencode

from fastapi import Query, Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from railyard.client.bounds import (
    INT32_MAX,
    JOBS_PAGE,
    MAX_JOBS_LISTED,
    MAX_LOG_OFFSET,
    MAX_QUEUE_NAME,
    MAX_USER_NAME,
    QUEUE_NAME_PATTERN,
    USER_NAME_PATTERN,
)
from railyard.control import schemas as s
from railyard.control.errors import (
    Invalid,
)
from railyard.control.store.bulk import StoredViews
from railyard.control.store.effects import wants_wake
from railyard.control.store.tables import JobState
from railyard.control.submission import JobBatch, JobSubmit
from railyard.control.usecases import (
    fairshare,
    joblookup,
    jobs,
    jobsignal,
    jobupdate,
    jobviews,
    logs,
    requeue,
)
from railyard.control.usecases.admission import admit_batch
from railyard.control.usecases.groupcommit import (
    SubmitRequest,
)
from railyard.control.usecases.logs import read_log as read_log

if TYPE_CHECKING:
    pass
from railyard.control.api.deps import (
    _T,
    Context,
    ContextDep,
    CurrentUser,
    SessionDep,
    Submitter,
    v1_router,
)
from railyard.control.api.errors import status_of

router = v1_router()


@router.post("/jobs", status_code=201)
async def submit_job(spec: JobSubmit, user: Submitter, ctx: ContextDep) -> list[s.JobOut]:
    """Submit a job or an array; one record either way (an array's: id ``1234``, ``array``
    ``0-9999%2``, as sbatch prints one id); its tasks are ``GET /v1/jobs?array=1234``."""

    if spec.array is None and ctx.submits is not None:  # shares a transaction with others
        rows, now = await ctx.submits.arun(SubmitRequest(user, spec))
        return [s.JobOut.from_submitted(rows, user.name, now)]

    def store(session: Session, now: float, flavors: set[str] | None) -> list[s.JobOut]:
        rows = jobs.submit(
            session, user, spec, now, spool_dir=ctx.spool_dir, known_flavors=flavors,
            run_as=ctx.run_as, limits=ctx.limits,
        )  # fmt: skip
        return [s.JobOut.from_submitted(rows, user.name, now)]

    return await run_in_threadpool(_write, ctx, store)  # an array: its own transaction


@router.post("/jobs/batch", status_code=201)
async def submit_batch(batch: JobBatch, user: Submitter, ctx: ContextDep) -> list[s.JobOut]:
    """Submit up to 1,000 jobs at once, all or nothing; one record per job, as ``/v1/jobs``."""

    def store(session: Session, now: float, flavors: set[str] | None) -> list[s.JobOut]:
        admitted = admit_batch(
            session, user, batch.jobs, now, known_flavors=flavors, run_as=ctx.run_as,
            limits=ctx.limits,
        )  # fmt: skip
        stored = jobs.store_admitted(session, user, admitted, now, ctx.spool_dir)
        return batch_records(stored, user.name, now)

    return await run_in_threadpool(_write, ctx, store)


_OWN = frozenset({"id", "number", "task_number", "command"})  # what alike jobs differ in


def batch_records(stored: Sequence[Sequence[Any]], user: str, now_t_s: float) -> list[s.JobOut]:
    """``JobOut.from_submitted`` of each of a batch's jobs. A job whose row differs from the
    one before only in what alike jobs have of their own (id, numbers, command) is a copy of
    that one's record with those changed: building each of 1,000 records took 110 ms, half a
    PostgreSQL batch's server time (cProfile). Rows copied by the store from one row (a batch
    of alike jobs, `store_admitted`) share one base: they are known alike without a look."""
    out: list[s.JobOut] = []
    before: dict[str, Any] | None = None
    base: dict[str, Any] | None = None
    for rows in stored:
        one = len(rows) == 1
        if one and isinstance(rows, StoredViews) and rows.base is base:
            row = rows.own(0)
        elif one and before is not None and _alike(before, row := vars(rows[0])):
            pass
        else:
            out.append(s.JobOut.from_submitted(rows, user, now_t_s))
            before = vars(rows[0]) if one else None
            base = rows.base if one and isinstance(rows, StoredViews) else None
            continue
        update = {"id": row["id"], "task_number": row["task_number"], "command": row["command"]}
        out.append(out[-1].model_copy(update=update))
    return out


def _alike(before: dict[str, Any], row: dict[str, Any]) -> bool:
    """Whether two stored rows (``JobView`` columns) differ only in ``_OWN``."""
    if before.keys() != row.keys():
        return False
    return all(value == row[key] for key, value in before.items() if key not in _OWN)


def _write(ctx: Context, work: Callable[[Session, float, set[str] | None], _T]) -> _T:
    """A submit's whole write transaction in one worker thread: ``work`` runs, the
    transaction commits (durable before the 201), then the loop is woken. As ``get_db``
    with the route in it, but the store's write lock (SQLite's) is held for this one thread
    hop only, not across FastAPI's hops from dependency to route to dependency exit
    (measured: most of a single submit's time under 8 clients was those hops)."""
    flavors = ctx.known_flavors() if ctx.known_flavors else None
    with ctx.store.session(write=True) as session:
        out = work(session, ctx.clock(), flavors)
        wake = wants_wake(session)
    if wake:
        ctx.wake()
    return out


AFTER_PATTERN = r"^[0-9]{1,18}(_[0-9]{1,9})?$"  # a job id: 12 or 12_3


@router.get("/jobs", response_model=list[s.JobOut])
def list_jobs(
    request: Request,
    session: SessionDep,
    user: CurrentUser,
    ctx: ContextDep,
    state: Annotated[list[JobState] | None, Query(description="repeat for several")] = None,
    queue: Annotated[
        str | None, Query(max_length=MAX_QUEUE_NAME, pattern=QUEUE_NAME_PATTERN)
    ] = None,
    owner: Annotated[
        str | None, Query(alias="user", max_length=MAX_USER_NAME, pattern=USER_NAME_PATTERN)
    ] = None,
    array: Annotated[
        str | None, Query(max_length=64, description="the tasks of this array")
    ] = None,
    finished_within_s: Annotated[
        float | None,
        Query(ge=0, le=1e9, description="finished jobs only if they ended this recently"),
    ] = None,
    since: Annotated[
        float | None, Query(ge=0, le=1e11, description="Unix time: not ended before it")
    ] = None,
    until: Annotated[
        float | None, Query(ge=0, le=1e11, description="Unix time: submitted by it")
    ] = None,
    limit: Annotated[int | None, Query(ge=1, le=MAX_JOBS_LISTED)] = None,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
    after: Annotated[
        str | None,
        Query(
            max_length=64,
            pattern=AFTER_PATTERN,
            description="the last job id of the previous page (its Link rel=next)",
        ),
    ] = None,
) -> Response:
    """A user's own jobs, oldest first; an admin sees everyone's (filter with ``user``).
    ``since`` and ``until`` select the jobs waiting or running at some moment between them
    (sacct). Without ``limit``, one page of `JOBS_PAGE`; a full page links the next
    (``Link: <...after=ID>; rel="next"``, ``X-Next-Cursor: ID``), a walk of the number
    index from the id given, whoever's it is (the cursor is read off the id, never looked up)."""
    now = ctx.clock()
    page = limit if limit is not None else JOBS_PAGE
    rows = jobs.list_jobs(
        session,
        user,
        states=[st.value for st in state] if state else None,
        queue=queue,
        user=owner,
        array=array,
        finished_within_s=finished_within_s,
        since_t_s=since,
        until_t_s=until,
        now_t_s=now,
        limit=page,
        offset=offset,
        after=_cursor(after) if after is not None else None,
    )
    body = [s.JobOut.from_row(r, name, now).model_dump(mode="json") for r, name in rows]
    headers = {}
    if len(rows) == page and rows:
        last = rows[-1][0].id
        query = [(k, v) for k, v in request.query_params.multi_items()
                 if k not in ("after", "offset")] + [("after", last)]  # fmt: skip
        headers = {"Link": f'</v1/jobs?{urlencode(query)}>; rel="next"', "X-Next-Cursor": last}
    return JSONResponse(body, headers=headers)


def _cursor(job_id: str) -> tuple[int, int]:
    """A job id's place in the oldest-first order: (number, array index, -1 for none)."""
    number, _, index = job_id.partition("_")
    return int(number), int(index) if index else -1


@router.get("/jobs/{job_id}")
def show_job(job_id: str, session: SessionDep, user: CurrentUser, ctx: ContextDep) -> s.JobOut:
    """One job's record; a pending job's under fair share says the figures it is ordered by
    (``fair_share``)."""
    row, name = joblookup.get_job(session, user, job_id)
    out = s.JobOut.from_row(row, name, ctx.clock())
    if ctx.ordering == "fairshare" and row.state == JobState.PENDING.value:
        out.fair_share = fairshare.fair_share_line(session, row.queue, name)
    return out


@router.get("/jobs/{job_id}/events")
def job_events(job_id: str, session: SessionDep, user: CurrentUser) -> list[s.EventOut]:
    """The job's history, oldest first (its newest 100 entries): start, pulling an image,
    running, preemption, requeue, end..."""
    return [s.EventOut(t_s=e.t_s, kind=e.kind, message=e.message)
            for e in jobviews.job_events(session, user, job_id)]  # fmt: skip


@router.patch("/jobs/{job_id}")
def update_job(
    job_id: str, change: s.JobUpdate, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> list[s.JobOut]:
    """``scontrol update``: a pending job's (or array's pending tasks') time limit, priority,
    nice, name or dependency, a running one's time limit, an array's throttle. A plain user
    may lower the time limit, not raise it (403). An array's id answers with its first task
    changed (``GET /v1/jobs?array=ID`` lists them all)."""
    now = ctx.clock()
    changed = jobupdate.update_job(session, user, job_id, change, now)
    return [s.JobOut.from_row(r, n, now) for r, n in changed]


@router.post("/jobs/cancel")
def cancel_jobs(
    body: s.JobCancel, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> s.CancelOut:
    """Cancel every job (or array) named, in one transaction; an id that a single cancel
    would refuse (unknown, another user's) is listed with why and stops none of the others."""
    now = ctx.clock()
    done, refused = jobs.cancel_jobs(session, user, body.ids, now)
    return s.CancelOut(
        jobs=[s.JobOut.from_row(r, n, now) for r, n in done],
        refused=[s.Refused(id=i, status=status_of(e), detail=e.line()) for i, e in refused],
    )


@router.delete("/jobs/{job_id}")
def cancel_job(
    job_id: str, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> list[s.JobOut]:
    """Cancel a job, or every task of an array given its parent id."""
    now = ctx.clock()
    return [s.JobOut.from_row(r, n, now) for r, n in jobs.cancel_job(session, user, job_id, now)]


@router.post("/jobs/{job_id}/hold")
def hold_job(
    job_id: str, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> list[s.JobOut]:
    """Keep a pending job, or an array's pending tasks, from starting (scontrol hold)."""
    now = ctx.clock()
    return [s.JobOut.from_row(r, n, now) for r, n in jobs.hold_job(session, user, job_id, now)]


@router.post("/jobs/{job_id}/requeue")
def requeue_job(
    job_id: str, session: SessionDep, user: CurrentUser, ctx: ContextDep, hold: bool = False
) -> list[s.JobOut]:
    """Stop a running job (an array's running tasks) and queue it again with one restart
    more (scontrol requeue; ``?hold=true``: requeuehold, it comes back held). Its output
    starts over unless it asked ``--open-mode=append``. 409 when none runs."""
    now = ctx.clock()
    again = requeue.requeue_job(session, user, job_id, now, hold=hold)
    return [s.JobOut.from_row(r, n, now) for r, n in again]


@router.post("/jobs/{job_id}/signal")
def signal_job(
    job_id: str, body: s.JobSignal, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> list[s.JobOut]:
    """Send a signal to a running job's processes, or an array's running tasks' (scancel
    --signal); the scheduler loop sends it once, with no escalation. 409 when none runs."""
    now = ctx.clock()
    name = f"B:{body.signal}" if body.batch else body.signal  # the executor's spelling
    signalled = jobsignal.signal_job(session, user, job_id, name, now)
    return [s.JobOut.from_row(r, n, now) for r, n in signalled]


@router.post("/jobs/{job_id}/release")
def release_job(
    job_id: str, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> list[s.JobOut]:
    """Let held jobs start again (scontrol release); only an admin releases an admin hold."""
    now = ctx.clock()
    released = jobs.release_job(session, user, job_id, now)
    return [s.JobOut.from_row(r, n, now) for r, n in released]


@router.get("/jobs/{job_id}/logs")
def job_logs(
    job_id: str,
    session: SessionDep,
    user: CurrentUser,
    ctx: ContextDep,
    rank: Annotated[int, Query(ge=0, le=INT32_MAX)] = 0,
    offset: Annotated[int, Query(ge=0, le=MAX_LOG_OFFSET)] = 0,
) -> s.LogChunk:
    """Text of one process's log from byte ``offset``; poll with the returned offset to follow.
    A batch script has one process (its output file, ``slurm-%j.out`` by default); a command
    job one per task. An offset past the end returns no text and the end's offset."""
    row, _ = joblookup.get_job(session, user, job_id)
    paths = logs.log_paths(row, ctx.spool_dir)
    if rank >= len(paths):
        raise Invalid("rank", f"job {job_id} has logs 0..{len(paths) - 1}")
    chunk, new_offset = logs.read_rank_log(row, rank, paths[rank], offset, ctx.spool_dir,
                                           ctx.remote_log)  # fmt: skip
    state = JobState(row.state)
    finished = state.finished and new_offset == offset
    return s.LogChunk(
        job_id=job_id, rank=rank, text=chunk, offset=new_offset, state=state, finished=finished
    )
