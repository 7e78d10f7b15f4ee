"""The REST API: thin routes over the use-cases (``jobs``, ``queues``, ``nodes``, ``users``).

Each request gets one transaction (``SessionDep``) that commits before the response is sent,
so a client that reads right after a write sees it; a refused request rolls back. Every error
is :class:`~railyard.control.schemas.ErrorOut`, one line in ``detail``: 400 (a body that
cannot be read), 401 (no, bad, revoked or expired token, with ``WWW-Authenticate: Bearer``),
403 (not allowed), 404 (missing, or another user's job: ids of others' jobs do not leak), 409
(exists, or would lock admins out), 413 (body over the limit), 422 (bad input, naming the
field and a hint), 503 (the store is unreachable, read-only, or still busy after the request
was run again: ``Retry-After``), 507 (no space left). No input of a client's is answered with
a 500.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from railyard import __version__
from railyard.client.bounds import (
    INT32_MAX,
    MAX_LOG_OFFSET,
    MAX_QUEUE_NAME,
    MAX_REQUEST_BYTES,
    MAX_USER_NAME,
    QUEUE_NAME_PATTERN,
    USER_NAME_PATTERN,
)
from railyard.control import auth, jobs, logs, nodes, queues, users
from railyard.control import schemas as s
from railyard.control.accounts import RunAs
from railyard.control.admission import admit_batch
from railyard.control.api_errors import BodyLimit, install_errors
from railyard.control.effects import wants_wake
from railyard.control.errors import (
    Invalid,
    describe_failure,
)
from railyard.control.groupcommit import GroupCommit, SubmitGroup, SubmitRequest, SubmitStore
from railyard.control.health import LoopHealth, loop_status
from railyard.control.logs import read_log as read_log
from railyard.control.metrics import MetricsConfig
from railyard.control.metrics_api import metrics_router
from railyard.control.retries import RetryRoute
from railyard.control.store import Store
from railyard.control.tables import JobState, User

if TYPE_CHECKING:
    from railyard.control.sweeps import AcrossChecks

log = logging.getLogger("railyard.api")
_T = TypeVar("_T")
_BEARER = {"WWW-Authenticate": "Bearer"}
_READS = {"GET", "HEAD", "OPTIONS"}
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": s.ErrorOut, "description": what}
    for code, what in (
        (400, "the request body cannot be read"),
        (401, "no, invalid, revoked or expired bearer token"),
        (403, "not allowed to this user"),
        (404, "no such object (or another user's job)"),
        (409, "conflicts with what exists"),
        (413, f"request body over {MAX_REQUEST_BYTES} bytes"),
        (422, "invalid input: detail names the field, what is wrong and a hint"),
        (503, "the store is unreachable, read-only or busy (see Retry-After)"),
        (507, "no space left for the store or the job files"),
    )
}


@dataclass(frozen=True)
class Context:
    store: Store
    wake: Callable[[], None]
    spool_dir: Path
    known_flavors: Callable[[], set[str]] | None
    clock: Callable[[], float]
    run_as: RunAs | None = None
    loop_health: LoopHealth | None = None
    health_fail_requeues: bool = False
    remote_log: logs.RemoteLog | None = None  # reads a log on another machine (Ray)
    across: AcrossChecks | None = None  # across-node sweeps (the loop's)
    submits: SubmitGroup | None = None  # single submits, committed in groups


def _ctx(request: Request) -> Context:
    ctx: Context = request.app.state.railyard
    return ctx


def get_db(request: Request) -> Iterator[Session]:
    """One transaction per request; the service loop is woken after a commit that needs it.
    A request that may write takes SQLite's write lock first (``Store.session(write=True)``)."""
    ctx = _ctx(request)
    with ctx.store.session(write=request.method not in _READS) as session:
        yield session
        wake = wants_wake(session)
    if wake:
        ctx.wake()


SessionDep = Annotated[Session, Depends(get_db, scope="function")]
CredentialsDep = Annotated[
    HTTPAuthorizationCredentials | None, Depends(HTTPBearer(auto_error=False))
]


def get_current_user(session: SessionDep, credentials: CredentialsDep, request: Request) -> User:
    if credentials is None:
        raise HTTPException(401, "missing bearer token", headers=_BEARER)
    user, why = auth.identify(session, credentials.credentials, _ctx(request).clock())
    if user is None:
        raise HTTPException(401, why, headers=_BEARER)
    return user


CurrentUser = Annotated[User, Depends(get_current_user)]


def _identify(ctx: Context, token: str) -> User:
    with ctx.store.session() as session:
        user, why = auth.identify(session, token, ctx.clock())
    if user is None:
        raise HTTPException(401, why, headers=_BEARER)
    return user


async def get_submitter(credentials: CredentialsDep, request: Request) -> User:
    """The caller of a submit, as ``get_current_user`` but read in its own short read
    transaction (one thread hop): the submit's write transaction (:func:`_write`) then holds
    the store's write lock only while it writes. A revoked token is refused by every request
    that begins after the revocation commits; the user is read before the body is judged, so
    a bad token is still 401 whatever the body."""
    if credentials is None:
        raise HTTPException(401, "missing bearer token", headers=_BEARER)
    return await run_in_threadpool(_identify, _ctx(request), credentials.credentials)


Submitter = Annotated[User, Depends(get_submitter)]


async def _context(request: Request) -> Context:
    """``_ctx`` as an async dependency: no hop to a worker thread for it."""
    return _ctx(request)


ContextDep = Annotated[Context, Depends(_context)]
QueuePath = Annotated[
    str, PathParam(max_length=MAX_QUEUE_NAME, pattern=QUEUE_NAME_PATTERN, description="a queue")
]
UserPath = Annotated[str, PathParam(max_length=MAX_USER_NAME, pattern=USER_NAME_PATTERN)]
NodePath = Annotated[str, PathParam(max_length=128, pattern=r"^[A-Za-z0-9_.:@-]+$")]
v1 = APIRouter(prefix="/v1", responses=ERRORS, route_class=RetryRoute)


@v1.get("/whoami")
def whoami(session: SessionDep, user: CurrentUser) -> s.UserOut:
    mine = sorted(queues.member_queues(session, user))
    return s.UserOut.model_validate({**_fields(user), "queues": mine})


@v1.post("/jobs", status_code=201)
async def submit_job(spec: s.JobSubmit, user: Submitter, ctx: ContextDep) -> list[s.JobOut]:
    """Submit a job or an array; one record either way (an array's: id ``1234``, ``array``
    ``0-9999%2``, as sbatch prints one id); its tasks are ``GET /v1/jobs?array=1234``."""

    if spec.array is None and ctx.submits is not None:  # shares a transaction with others
        rows, now = await run_in_threadpool(ctx.submits.run, SubmitRequest(user, spec))
        return [s.JobOut.from_submitted(rows, user.name, now)]

    def store(session: Session, now: float, flavors: set[str] | None) -> list[s.JobOut]:
        rows = jobs.submit(
            session, user, spec, now, spool_dir=ctx.spool_dir, known_flavors=flavors,
            run_as=ctx.run_as,
        )  # fmt: skip
        return [s.JobOut.from_submitted(rows, user.name, now)]

    return await run_in_threadpool(_write, ctx, store)  # an array: its own transaction


@v1.post("/jobs/batch", status_code=201)
async def submit_batch(batch: s.JobBatch, user: Submitter, ctx: ContextDep) -> list[s.JobOut]:
    """Submit up to 1,000 jobs at once, all or nothing; one record per job, as ``/v1/jobs``."""

    def store(session: Session, now: float, flavors: set[str] | None) -> list[s.JobOut]:
        admitted = admit_batch(
            session, user, batch.jobs, now, known_flavors=flavors, run_as=ctx.run_as
        )
        stored = jobs.store_admitted(session, user, admitted, now, ctx.spool_dir)
        return [s.JobOut.from_submitted(rows, user.name, now) for rows in stored]

    return await run_in_threadpool(_write, ctx, store)


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


@v1.get("/jobs")
def list_jobs(
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
    limit: Annotated[int | None, Query(ge=1, le=100_000)] = None,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
) -> list[s.JobOut]:
    """A user's own jobs; an admin sees everyone's (filter with ``user``). ``since`` and
    ``until`` select the jobs waiting or running at some moment between them (sacct)."""
    now = ctx.clock()
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
        limit=limit,
        offset=offset,
    )
    return [s.JobOut.from_row(r, name, now) for r, name in rows]


@v1.get("/jobs/{job_id}")
def show_job(job_id: str, session: SessionDep, user: CurrentUser, ctx: ContextDep) -> s.JobOut:
    row, name = jobs.get_job(session, user, job_id)
    return s.JobOut.from_row(row, name, ctx.clock())


@v1.delete("/jobs/{job_id}")
def cancel_job(
    job_id: str, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> list[s.JobOut]:
    """Cancel a job, or every task of an array given its parent id."""
    now = ctx.clock()
    return [s.JobOut.from_row(r, n, now) for r, n in jobs.cancel_job(session, user, job_id, now)]


@v1.post("/jobs/{job_id}/hold")
def hold_job(
    job_id: str, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> list[s.JobOut]:
    """Keep a pending job, or an array's pending tasks, from starting (scontrol hold)."""
    now = ctx.clock()
    return [s.JobOut.from_row(r, n, now) for r, n in jobs.hold_job(session, user, job_id, now)]


@v1.post("/jobs/{job_id}/release")
def release_job(
    job_id: str, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> list[s.JobOut]:
    """Let held jobs start again (scontrol release); only an admin releases an admin hold."""
    now = ctx.clock()
    released = jobs.release_job(session, user, job_id, now)
    return [s.JobOut.from_row(r, n, now) for r, n in released]


@v1.get("/jobs/{job_id}/logs")
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
    row, _ = jobs.get_job(session, user, job_id)
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


@v1.get("/nodes")
def list_nodes(session: SessionDep, user: CurrentUser) -> list[s.NodeOut]:
    return nodes.list_nodes(session, user)


def _node(session: Session, user: User, name: str) -> s.NodeOut:
    return next(n for n in nodes.list_nodes(session, user) if n.name == name)


@v1.post("/nodes/{name}/drain")
def drain_node(
    name: NodePath, body: s.NodeAction, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> s.NodeOut:
    nodes.drain_node(session, user, name, body.reason, ctx.clock())
    return _node(session, user, name)


@v1.post("/nodes/{name}/resume")
def resume_node(
    name: NodePath, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> s.NodeOut:
    nodes.resume_node(session, user, name, ctx.clock())
    return _node(session, user, name)


@v1.get("/queues")
def list_queues(session: SessionDep, user: CurrentUser) -> list[s.QueueOut]:
    """The queues the user belongs to and those below them; an admin sees all."""
    return queues.list_queues(session, user)


def _queue(session: Session, user: User, name: str) -> s.QueueOut:
    return next(q for q in queues.list_queues(session, user) if q.name == name)


@v1.post("/queues", status_code=201)
def create_queue(
    body: s.QueueCreate, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> s.QueueOut:
    queues.create_queue(session, user, body, ctx.clock())
    return _queue(session, user, body.name)


@v1.patch("/queues/{name}")
def update_queue(
    name: QueuePath, body: s.QueueUpdate, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> s.QueueOut:
    queues.update_queue(session, user, name, body, ctx.clock())
    return _queue(session, user, name)


@v1.post("/queues/{name}/members")
def add_member(
    name: QueuePath, body: s.MemberChange, session: SessionDep, user: CurrentUser
) -> s.QueueOut:
    queues.add_member(session, user, name, body.user)
    return _queue(session, user, name)


@v1.delete("/queues/{name}/members/{member}")
def remove_member(
    name: QueuePath, member: UserPath, session: SessionDep, user: CurrentUser
) -> s.QueueOut:
    queues.remove_member(session, user, name, member)
    return _queue(session, user, name)


def _fields(row: Any) -> dict[str, Any]:
    return {c: getattr(row, c) for c in row.__table__.columns.keys()}  # noqa: SIM118


@v1.get("/users")
def list_users(session: SessionDep, user: CurrentUser) -> list[s.UserOut]:
    return [
        s.UserOut.model_validate({**_fields(u), "queues": q})
        for u, q in users.list_users(session, user)
    ]


@v1.post("/users", status_code=201)
def create_user(
    body: s.UserCreate, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> s.UserOut:
    return s.UserOut.model_validate(_fields(users.create_user(session, user, body, ctx.clock())))


@v1.patch("/users/{name}")
def update_user(
    name: str, body: s.UserUpdate, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> s.UserOut:
    """Change a user's Unix account (``unix_user``) or admin flag."""
    changed = users.update_user(session, user, name, body, ctx.clock())
    return s.UserOut.model_validate(_fields(changed))


@v1.delete("/users/{name}")
def delete_user(name: str, session: SessionDep, user: CurrentUser, ctx: ContextDep) -> s.UserOut:
    """Remove a user (their tokens and memberships go with them); never the last admin."""
    return s.UserOut.model_validate(_fields(users.delete_user(session, user, name, ctx.clock())))


def _token_out(token: Any, user: str) -> dict[str, Any]:
    return {**_fields(token), "user": user}


@v1.get("/tokens")
def list_tokens(session: SessionDep, user: CurrentUser) -> list[s.TokenOut]:
    return [
        s.TokenOut.model_validate(_token_out(t, n)) for t, n in users.list_tokens(session, user)
    ]


@v1.post("/tokens", status_code=201)
def create_token(
    body: s.TokenCreate, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> s.TokenCreated:
    """A new token for ``body.user``; the plaintext is in this response only."""
    token, plaintext = users.create_token(session, user, body, ctx.clock())
    return s.TokenCreated.model_validate({**_token_out(token, body.user), "token": plaintext})


@v1.delete("/tokens/{token_id}")
def revoke_token(
    token_id: Annotated[int, PathParam(ge=1, le=INT32_MAX)],
    session: SessionDep,
    user: CurrentUser,
    ctx: ContextDep,
) -> s.TokenOut:
    token = users.revoke_token(session, user, token_id, ctx.clock())
    owner = session.get(User, token.user_id)
    return s.TokenOut.model_validate(_token_out(token, owner.name if owner else "?"))


def create_app(
    store: Store,
    *,
    wake: Callable[[], None],
    state_dir: Path,
    spool_dir: Path | None = None,
    known_flavors: Callable[[], set[str]] | None = None,
    clock: Callable[[], float] = time.time,
    run_as: RunAs | None = None,
    loop_health: LoopHealth | None = None,
    metrics: MetricsConfig | None = None,
    health_fail_requeues: bool = False,
    remote_log: logs.RemoteLog | None = None,
    extra_routers: Sequence[APIRouter] = (),
    across: AcrossChecks | None = None,
) -> FastAPI:
    """The API over ``store``; ``wake`` is called after each commit the service loop must see
    (submit, cancel, node or queue change). Job files are under ``spool_dir`` (default
    ``state_dir/jobs``). ``run_as`` checks at submit that this server can run a job as its
    user's Unix account (``railyard up`` passes it; None skips the check). ``/healthz``
    reports the loop's ``loop_health`` and whether the store answers; ``/metrics`` serves
    what ``metrics`` says (default: the store's figures, for an admin's token).
    ``health_fail_requeues``: a failed health check requeues the node's jobs (else drains)."""
    from railyard.control.health_api import router as health_router  # it imports this module

    app = FastAPI(
        title="railyard",
        version=__version__,
        description="Submit and watch training jobs on a shared GPU cluster. Errors are "
        "ErrorOut: a one-line `detail` naming the field, what is wrong and a hint.",
    )
    spool = Path(spool_dir) if spool_dir is not None else Path(state_dir) / "jobs"
    submits = GroupCommit(SubmitStore(store, wake, spool, clock, known_flavors, run_as))
    app.state.railyard = Context(
        store, wake, spool, known_flavors, clock, run_as, loop_health, health_fail_requeues,
        remote_log, across, submits,
    )  # fmt: skip

    @app.get(
        "/healthz", tags=["health"], response_model=s.Health, responses={503: {"model": s.Health}}
    )
    def healthz() -> Any:
        """``ok``, or 503 ``failing`` with why: the store does not answer, a step of the
        scheduler loop failed in the last minute, the loop is behind, or jobs are stuck in a
        transient state past their deadline (how many, which)."""
        now = clock()
        problem = _store_problem(store)
        health = loop_health
        status = None
        if problem is None and health is not None:
            with store.session() as session:
                status = loop_status(session, health, now)
            problem = status.reason()
        body = s.Health(
            status="failing" if problem else "ok",
            version=__version__,
            reason=problem,
            last_step_t_s=health.last_ok_t_s if health else None,
            failing_steps=health.failing_steps if health else 0,
            last_failed_t_s=health.last_failed_t_s if health else None,
            behind_s=status.behind_s if status else None,
            stuck_jobs=status.stuck.total if status else 0,
            stuck=list(status.stuck.ids) if status else [],
        )
        if problem:
            return JSONResponse(body.model_dump(), status_code=503)
        return body

    app.include_router(v1)
    app.include_router(health_router)
    for router in extra_routers:  # the dashboard (railyard.web), mounted by `railyard up`
        app.include_router(router)
    app.include_router(
        metrics_router(store, metrics or MetricsConfig(loop_health=loop_health), clock)
    )
    install_errors(app)
    app.add_middleware(BodyLimit)
    return app


def _store_problem(store: Store) -> str | None:
    try:
        with store.engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except DBAPIError as exc:
        refusal = describe_failure(exc)
        return f"store unreachable: {refusal.line() if refusal else exc}"
    return None


__all__ = ["CurrentUser", "SessionDep", "create_app"]
