"""What every route depends on: the app's context, one transaction per request, the
caller from its bearer token, path parameters, the error responses, and the ``/v1`` router
each noun's module makes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi import Path as PathParam
from fastapi.openapi.constants import REF_PREFIX
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from railyard.client.bounds import (
    MAX_QUEUE_NAME,
    MAX_REQUEST_BYTES,
    MAX_USER_NAME,
    QUEUE_NAME_PATTERN,
    USER_NAME_PATTERN,
)
from railyard.control import schemas as s
from railyard.control.store.database import Store
from railyard.control.store.effects import wants_auth_reload, wants_wake
from railyard.control.store.retries import RetryRoute
from railyard.control.store.tables import User
from railyard.control.usecases import auth, logs
from railyard.control.usecases.accounts import RunAs
from railyard.control.usecases.activity import Activity
from railyard.control.usecases.groupcommit import (
    SubmitGroup,
)
from railyard.control.usecases.logs import read_log as read_log
from railyard.control.usecases.loopstatus import LoopHealth
from railyard.control.usecases.sizebounds import DEFAULT_LIMITS, SiteLimits
from railyard.control.usecases.whatif import Simulate
from railyard.exec.terminals.jobsocket import SocketOpener

if TYPE_CHECKING:
    from railyard.control.loop.sweeps import AcrossChecks


_T = TypeVar("_T")


_BEARER = {"WWW-Authenticate": "Bearer"}


_READS = {"GET", "HEAD", "OPTIONS"}
READ_ONLY_POSTS = {"/v1/whatif/submit"}
"""POSTs that store nothing: sbatch --test-only checks a submission and runs the twin for
seconds; holding SQLite's write lock that long would stall every submit and the loop."""


# Each error names ErrorOut's schema itself: with ``"model": ErrorOut`` FastAPI built a
# pydantic adapter for every code of every route (nine a route, ~500 in all, 0.2 s of a
# server's start) to write this same reference into /openapi.json. The schema itself is in
# the document through /metrics' responses (tests/control/test_openapi.py checks it is).
_ERROR_CONTENT = {"application/json": {"schema": {"$ref": f"{REF_PREFIX}{s.ErrorOut.__name__}"}}}
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"description": what, "content": _ERROR_CONTENT}
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
    state_dir: Path | None = None  # the executor's records (interactive jobs' sockets)
    activity: Activity | None = None  # when users last sent their interactive jobs anything
    tokens: auth.TokenCache | None = None  # who recently seen tokens are (the submit path)
    ordering: str = "fairshare"  # the loop's ordering policy (`sched.policies.ordering`)
    whatif: Simulate | None = None  # the twin, handed in by `railyard up` (api/whatif.py)
    remote_socket: SocketOpener | None = None  # reaches a job's socket on another machine (Ray)
    limits: SiteLimits = DEFAULT_LIMITS  # the site's bounds on a job's size (`up --max-...`)
    starvation_limit_s: float | None = None  # the loop's (`up --starvation-limit`); None: default


def _ctx(request: Request) -> Context:
    ctx: Context = request.app.state.railyard
    return ctx


def get_db(request: Request) -> Iterator[Session]:
    """One transaction per request; the service loop is woken after a commit that needs it.
    A request that may write takes SQLite's write lock first (``Store.session(write=True)``)."""
    ctx = _ctx(request)
    write = request.method not in _READS and request.url.path not in READ_ONLY_POSTS
    with ctx.store.session(write=write) as session:
        yield session
        wake = wants_wake(session)
        reload_auth = wants_auth_reload(session)
    if reload_auth and ctx.tokens is not None:
        ctx.tokens.forget()
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
        if ctx.tokens is None:
            user, why = auth.identify(session, token, ctx.clock())
        else:
            user, why = auth.identify_cached(session, token, ctx.tokens, ctx.clock())
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
    ctx = _ctx(request)
    if ctx.tokens is not None:  # seen lately: no thread hop, no read
        user = ctx.tokens.get(credentials.credentials, ctx.clock())
        if user is not None:
            return user
    return await run_in_threadpool(_identify, ctx, credentials.credentials)


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


def v1_router() -> APIRouter:
    """A router for one noun's routes under ``/v1``: the shared error responses, and a retry
    of a request whose transaction lost a race for the store."""
    return APIRouter(prefix="/v1", responses=ERRORS, route_class=RetryRoute)
